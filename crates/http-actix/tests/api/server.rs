//! The bundled server on a real socket: it serves the same application, refuses oversized bodies
//! before reading them, and stops when its handle says so.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use mcpgw_http_actix::{HttpSettings, build_server};
use serde_json::Value;

use crate::support::harness_with;

/// Sends one raw HTTP/1.1 request and returns the status code and the body.
async fn exchange(address: SocketAddr, request: String) -> (u16, String) {
    actix_web::rt::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(address).expect("the server accepts connections");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        // The server closes the connection after answering (`Connection: close`).
        let _ = stream.read_to_end(&mut response);
        let response = String::from_utf8_lossy(&response).into_owned();
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default();
        (status, body)
    })
    .await
    .unwrap()
}

#[actix_web::test]
async fn the_bundled_server_serves_the_api_and_stops_on_request() {
    let settings = HttpSettings {
        max_body_bytes: 2048,
        workers: 1,
        ..HttpSettings::default()
    };
    let harness = harness_with(settings.clone());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let server = build_server(harness.state.clone(), listener, &settings).unwrap();
    let handle = server.handle();
    let running = actix_web::rt::spawn(server);

    let (status, body) = exchange(
        address,
        "GET /health/live HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_owned(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["status"],
        "alive"
    );

    // A declared length above the limit is refused without sending the body.
    let (status, body) = exchange(
        address,
        "POST /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            .to_owned(),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    let envelope: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(envelope["error"], "PayloadTooLargeError");

    // A body under the limit over a real connection creates the server.
    let json = r#"{"mcp_server_id": "wired", "mode": "subprocess", "command": ["x"]}"#;
    let (status, body) = exchange(
        address,
        format!(
            "POST /api/mcp_servers HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
            json.len()
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    handle.stop(true).await;
    running.await.unwrap().expect("the server stops cleanly");
    assert!(
        TcpStream::connect(address).is_err(),
        "the listener is closed after stop"
    );
}
