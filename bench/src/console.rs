//! `console`: how long each page of the web console takes with a big fleet: 1,000 registered
//! servers (none started) that declare 5 tools each, 5,000 tools in all, behind a gateway with
//! authentication off (so no sign-in is needed to read the pages). Every page is fetched at
//! concurrency 1 over keep-alive, and the figure is the time from the request's first byte
//! sent to the answer's last byte read: the page's server-side rendering plus a loopback round
//! trip.

use std::path::Path;

use anyhow::bail;

use crate::{sibling_binary, start_gateway, stats};

const SERVERS: usize = 1000;
const TOOLS_PER_SERVER: usize = 5;
const REQUESTS_PER_PAGE: usize = 200;

fn fleet_config(fixture: &Path) -> String {
    let mut yaml = String::from("probe_tools: false\nmcp_servers:\n");
    for index in 0..SERVERS {
        yaml.push_str(&format!(
            "  server-{index:04}:\n    mode: subprocess\n    command: [\"{}\"]\n    description: bench server {index}\n    tools:\n",
            fixture.display()
        ));
        for tool in 0..TOOLS_PER_SERVER {
            yaml.push_str(&format!(
                "      - {{name: tool-{tool}, description: \"tool {tool} of server {index}\", inputSchema: {{type: object, properties: {{text: {{type: string}}, count: {{type: integer}}}}, required: [text]}}}}\n"
            ));
        }
    }
    yaml.push_str(
        "  pool:\n    mode: group\n    strategy: round_robin\n    min_healthy: 1\n    members: [{id: server-0001}, {id: server-0002}, {id: server-0003}]\n",
    );
    yaml
}

pub fn run() -> anyhow::Result<()> {
    let gateway_binary = sibling_binary("mcpgw")?;
    let fixture = sibling_binary("mcpgw-fixture-server")?;
    let work = tempfile::tempdir()?;
    let config = work.path().join("gateway.yaml");
    std::fs::write(&config, fleet_config(&fixture))?;
    let gateway = start_gateway(&gateway_binary, &config, &work.path().join("data"))?;
    println!(
        "# console: {SERVERS} servers, {} tools, auth off; {REQUESTS_PER_PAGE} requests per page at c=1 (target: under 100 ms each)",
        SERVERS * TOOLS_PER_SERVER
    );
    let pages = [
        "/ui/",
        "/ui/servers",
        "/ui/servers?page=20",
        "/ui/servers?q=server-09&state=cold",
        "/ui/servers-rows?q=&state=&page=1",
        "/ui/servers/server-0500",
        "/ui/servers/server-0500/live",
        "/ui/servers/server-0500/edit",
        "/ui/new-server",
        "/ui/tools",
        "/ui/tools?q=tool-3&page=10",
        "/ui/tools/server-0500__tool-2",
        "/ui/groups",
        "/ui/discovery",
        "/ui/access",
        "/ui/events",
        "/ui/config",
    ];
    println!(
        "{:<40} {:>9} {:>9} {:>10}",
        "page", "p50 ms", "p99 ms", "bytes"
    );
    for page in pages {
        let mut client = crate::http::Client::connect(&gateway.address)?;
        let (status, body) = client.get(page)?;
        if status != 200 {
            bail!("{page} answered {status}");
        }
        // Warm-up, then the measured requests.
        stats::run_load(&gateway.address, page, 1, 20)?;
        let result = stats::run_load(&gateway.address, page, 1, REQUESTS_PER_PAGE)?;
        println!(
            "{page:<40} {:>9.3} {:>9.3} {:>10}",
            stats::millis(result.p50),
            stats::millis(result.p99),
            body.len()
        );
    }
    Ok(())
}
