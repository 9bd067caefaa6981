#!/usr/bin/env python3
"""What an operator does in the web console, in headless chromium, against a real gateway that
tests/console.rs started.

    console_flows.py --screenshots DIR SCENARIO PARAMETERS_JSON

SCENARIO is one of:
- admin: signs in with an API key (after a wrong one is refused), then every page: creates a
  server through the form (a bad id first, which must show the API's own message), starts it
  and watches its state and its stderr change on the open page while something else drives the
  server (the page is never reloaded), calls a tool from its form, approves a pending discovery,
  makes and revokes an API key; on the access page makes a custom role with two permissions,
  changes it, assigns it, asks "why is this denied" before and after a tool access policy that
  denies the principal (and for a group's tool), deletes the policy, revokes the role and
  deletes it; sends a form without its CSRF token (refused), and signs out.
- viewer: signs in as a local user with a password; sees no control that changes anything (on
  the access page too, which a custom role lets it read), and forged form posts that carry the
  right CSRF token are refused all the same and change nothing.
- sso: signs in through the OpenID provider (single sign-on) and lands signed in as the
  provider's user, with the roles of its group.

Every page visited is checked with axe-core (no critical or serious violation) at 1280x800 and
at a 390-pixel phone width (no horizontal scrolling), logs no JavaScript error, and is saved as
a screenshot.

PARAMETERS_JSON holds base_url and what the scenario needs: admin_key, fixture, pending (the
name of a pending discovered definition), bad_id_message (what the API answers for the id
`bad id!`), demo (a server that runs the fixture), viewer_user, viewer_password, sso_user.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from browser_kit import (
    Scenario,
    axe_violations,
    console_errors,
    desktop,
    new_driver,
    no_horizontal_overflow,
    phone_width,
    run_scenario,
    wait_for,
    wait_for_text,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

SHORT = 10.0
LIVE = 20.0
# What the started server is made to write to stderr while its page is watched.
STDERR_TEXT = "written while the page was open"


def url(parameters: dict, path: str) -> str:
    return parameters["base_url"].rstrip("/") + path


def inspect_page(scenario: Scenario, driver, name: str) -> None:
    """axe at both widths, no horizontal overflow on a phone, no JavaScript error, and a
    screenshot at each width."""
    desktop(driver)
    violations = axe_violations(driver)
    scenario.check(f"{name}: no serious accessibility violation at 1280x800", not violations, violations)
    scenario.screenshot(driver, name)
    phone_width(driver)
    time.sleep(0.2)
    scenario.check(f"{name}: fits a 390-pixel-wide phone", no_horizontal_overflow(driver),
                   driver.execute_script(
                       "return [document.scrollingElement.scrollWidth, window.innerWidth]"))
    violations = axe_violations(driver)
    scenario.check(f"{name}: no serious accessibility violation on a phone", not violations, violations)
    scenario.screenshot(driver, f"{name}-phone")
    desktop(driver)
    errors = [error for error in console_errors(driver) if not is_refused_page(error)]
    scenario.check(f"{name}: no JavaScript error", not errors, errors)


def is_refused_page(error: dict) -> bool:
    """A page that answered 4xx on purpose (a refused sign-in, a form shown again with its
    error) is logged by the browser as a failed load; a script, a style sheet or a fragment
    that failed to load is not excused."""
    message = error.get("message", "")
    return (error.get("source") == "network" and "/ui/assets/" not in message
            and "/rows" not in message and "/live" not in message)


def sign_in_with_key(scenario: Scenario, driver, parameters: dict, key: str) -> None:
    driver.get(url(parameters, "/ui/servers"))
    wait_for(driver, "#key-form", SHORT)
    scenario.check("a page without a session sends the browser to sign in",
                   "/ui/login" in driver.current_url, driver.current_url)
    field = driver.find_element(By.ID, "api_key")
    field.clear()
    field.send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()


def post_without_csrf(driver, path: str) -> int:
    """A same-origin form post that lacks the CSRF token: what a script injected into the page
    could try. Answers the status."""
    return driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        fetch(arguments[0], {method: "POST", body: new URLSearchParams({}), redirect: "manual"})
          .then((answer) => done(answer.status)).catch((error) => done(String(error)));
        """,
        path,
    )


def post_with_page_csrf(driver, path: str) -> int:
    """A form post forged with the page's own CSRF token (a viewer crafting the request)."""
    return driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        const token = document.getElementById("main").dataset.csrf;
        fetch(arguments[0], {method: "POST", body: new URLSearchParams({csrf_token: token}),
                             redirect: "manual"})
          .then((answer) => done(answer.status)).catch((error) => done(String(error)));
        """,
        path,
    )


def forge(driver, path: str, fields: dict) -> int:
    """A form post with the page's own CSRF token and `fields` (repeated when a value is a
    list): what a visitor could craft without the control on the page. Answers the status."""
    return driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        const body = new URLSearchParams({csrf_token: document.getElementById("main").dataset.csrf});
        for (const [name, value] of Object.entries(arguments[1])) {
          for (const one of [].concat(value)) { body.append(name, one); }
        }
        fetch(arguments[0], {method: "POST", body: body, redirect: "manual"})
          .then((answer) => done(answer.status)).catch((error) => done(String(error)));
        """,
        path,
        fields,
    )


def api_status(parameters: dict, method: str, path: str) -> tuple[int, dict]:
    """A REST call with the admin key that answers its status and body, a refusal included."""
    request = urllib.request.Request(url(parameters, path), method=method)
    request.add_header("X-API-Key", parameters["admin_key"])
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"{}")


def ask_why(driver, parameters: dict, principal: str, tool: str) -> str:
    """Asks "why is this denied" through its form; answers the text of the answer."""
    driver.get(url(parameters, "/ui/access"))
    wait_for(driver, "#why-form", SHORT)
    driver.find_element(By.ID, "why-principal").send_keys(principal)
    driver.find_element(By.ID, "why-tool").send_keys(tool)
    driver.find_element(By.ID, "why-check").click()
    return wait_for(driver, "#why-answer", SHORT).text


def manage_access(scenario: Scenario, driver, parameters: dict) -> None:
    """Roles, assignments and tool access policies, changed through the access page's forms."""
    principal = "user:console-made"
    driver.get(url(parameters, "/ui/access"))
    wait_for(driver, "#role-form", SHORT)
    scenario.check("a built-in role offers no delete button",
                   not driver.find_elements(By.CSS_SELECTOR, "#role-rows tr[data-role='admin'] button"))
    # A custom role with two permissions.
    driver.find_element(By.ID, "role-name").send_keys("deployer")
    driver.find_element(By.ID, "role-description").send_keys("made in the console")
    for permission in ("tool:invoke", "tool:list"):
        driver.find_element(
            By.CSS_SELECTOR, f"#role-form input[name='permissions'][value='{permission}']").click()
    driver.find_element(By.ID, "create-role").click()
    wait_for_text(driver, ".notice", "role was created", SHORT)
    role = api(parameters, "GET", "/api/auth/roles/deployer")
    scenario.check("the form makes the role with the two ticked permissions",
                   sorted(role.get("permissions", [])) == ["tool:invoke", "tool:list"], role)
    wait_for(driver, "#role-rows tr[data-role='deployer']", SHORT)
    # Change its description; its permissions stay as they were ticked.
    driver.find_element(By.CSS_SELECTOR, "#edit-deployer summary").click()
    description = driver.find_element(By.ID, "role-deployer-description")
    description.clear()
    description.send_keys("deploys from the console")
    driver.find_element(By.CSS_SELECTOR, "#edit-deployer button[type=submit]").click()
    wait_for_text(driver, ".notice", "role was changed", SHORT)
    role = api(parameters, "GET", "/api/auth/roles/deployer")
    scenario.check("changing the role keeps what was not changed",
                   role.get("description") == "deploys from the console"
                   and sorted(role.get("permissions", [])) == ["tool:invoke", "tool:list"], role)
    # Forged: a built-in role cannot be deleted; the API's 409 answers.
    status = forge(driver, "/ui/access/roles/admin/delete", {})
    scenario.check("a forged delete of a built-in role gets the API's 409", status == 409, status)

    # Assign it, and see it in the table.
    driver.find_element(By.ID, "assign-principal").send_keys(principal)
    Select(driver.find_element(By.ID, "assign-role")).select_by_value("deployer")
    driver.find_element(By.ID, "assign").click()
    wait_for_text(driver, ".notice", "role was assigned", SHORT)
    held = wait_for(driver, f"#principal-rows tr[data-principal='{principal}']", SHORT).text
    scenario.check("the table shows who holds the role", "deployer" in held, held)

    # Why: the role grants the call; then a policy that denies the principal is named.
    answer = ask_why(driver, parameters, principal, "made__add")
    scenario.check("why: the new role grants the call", "`deployer` grants it" in answer, answer)
    driver.find_element(By.ID, "policy-target").send_keys("made")
    Select(driver.find_element(By.ID, "policy-scope")).select_by_value("provider")
    driver.find_element(By.ID, "policy-deny").send_keys(principal)
    driver.find_element(By.ID, "set-policy").click()
    wait_for_text(driver, ".notice", "policy was set", SHORT)
    policy = api(parameters, "GET", "/api/auth/policies/provider/made")
    scenario.check("the form sets the policy", policy.get("deny_list") == [principal], policy)
    answer = ask_why(driver, parameters, principal, "made__add")
    scenario.check("why names the policy that denies", "tool access policy provider/made denies" in answer,
                   answer)
    driver.execute_script("window.confirm = () => true;")
    driver.find_element(By.CSS_SELECTOR, "#policy-rows tr[data-policy='provider/made'] button.danger").click()
    wait_for_text(driver, ".notice", "policy was deleted", SHORT)
    status, _ = api_status(parameters, "GET", "/api/auth/policies/provider/made")
    scenario.check("deleting in the console clears the policy", status == 404, status)
    answer = ask_why(driver, parameters, principal, "made__add")
    scenario.check("without the policy the answer changes",
                   "denies" not in answer and "`deployer` grants it" in answer, answer)
    # A group's tool is decided on the group's path.
    answer = ask_why(driver, parameters, principal, "pool__echo")
    scenario.check("why answers for a group's tool", "of the group `pool`" in answer
                   and "`group/pool`" in answer, answer)
    inspect_page(scenario, driver, "access-managed")
    driver.execute_script("document.getElementById('why-answer').scrollIntoView()")
    scenario.screenshot(driver, "access-why-group")
    driver.execute_script("document.getElementById('principals-heading').scrollIntoView()")
    scenario.screenshot(driver, "access-assignments")
    driver.execute_script("document.querySelector('#edit-deployer').open = true;"
                          "document.getElementById('roles-heading').scrollIntoView()")
    scenario.screenshot(driver, "access-roles")

    # Revoke the role, then delete it.
    driver.get(url(parameters, "/ui/access"))
    driver.execute_script("window.confirm = () => true;")
    wait_for(driver, f"#principal-rows tr[data-principal='{principal}'] button.danger", SHORT).click()
    wait_for_text(driver, ".notice", "revoked from the principal", SHORT)
    roles = api(parameters, "GET", f"/api/auth/principals/roles?principal={principal}")["roles"]
    scenario.check("revoking in the console takes the role away", roles == [], roles)
    driver.execute_script("window.confirm = () => true;")
    driver.find_element(By.CSS_SELECTOR, "#role-rows tr[data-role='deployer'] button.danger").click()
    wait_for_text(driver, ".notice", "role was deleted", SHORT)
    status, _ = api_status(parameters, "GET", "/api/auth/roles/deployer")
    scenario.check("deleting in the console deletes the role", status == 404, status)
    scenario.screenshot(driver, "access-after-changes")


def api(parameters: dict, method: str, path: str, body: dict | None = None) -> dict:
    """A REST call with the admin key, from outside the browser."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url(parameters, path), data=data, method=method)
    request.add_header("X-API-Key", parameters["admin_key"])
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read() or b"{}")


def admin(scenario: Scenario, parameters: dict) -> None:
    driver = new_driver()
    # A wrong key is refused on the sign-in page itself.
    sign_in_with_key(scenario, driver, parameters, "mcpgw_not-a-real-key-at-all")
    wait_for(driver, "#login-error", SHORT)
    scenario.check("a wrong API key is refused on the sign-in page", "/ui/login" in driver.current_url)
    inspect_page(scenario, driver, "login")
    field = driver.find_element(By.ID, "api_key")
    field.clear()
    field.send_keys(parameters["admin_key"])
    driver.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()
    wait_for(driver, "#server-rows", SHORT)
    scenario.check("signing in with a key goes on to the page asked for",
                   driver.current_url.endswith("/ui/servers"), driver.current_url)
    cookies = {cookie["name"]: cookie for cookie in driver.get_cookies()}
    session = cookies.get("mcpgw_session")
    scenario.check("the session cookie is HttpOnly and SameSite=Strict",
                   bool(session) and session.get("httpOnly") and session.get("sameSite") == "Strict",
                   cookies)
    inspect_page(scenario, driver, "servers")

    driver.get(url(parameters, "/ui/"))
    wait_for(driver, "#overview-live", SHORT)
    inspect_page(scenario, driver, "overview")

    # Create a server through the form; a bad id first.
    driver.get(url(parameters, "/ui/new-server"))
    wait_for(driver, "#server-form", SHORT)
    inspect_page(scenario, driver, "server-form")
    driver.find_element(By.ID, "mcp_server_id").send_keys("bad id!")
    driver.find_element(By.ID, "command").send_keys(parameters["fixture"])
    driver.find_element(By.ID, "save").click()
    error = wait_for(driver, "#form-error", SHORT).text
    scenario.check("a bad id shows the API's own message", parameters["bad_id_message"] in error,
                   {"shown": error, "api": parameters["bad_id_message"]})
    scenario.check("the form keeps what was typed",
                   driver.find_element(By.ID, "command").get_attribute("value") == parameters["fixture"])
    field = driver.find_element(By.ID, "mcp_server_id")
    field.clear()
    field.send_keys("made")
    driver.find_element(By.ID, "description").send_keys("made in the console")
    driver.find_element(By.ID, "save").click()
    wait_for_text(driver, ".notice", "created", SHORT)
    scenario.check("the server was created", driver.current_url.endswith("/ui/servers/made?done=created"),
                   driver.current_url)
    listed = api(parameters, "GET", "/api/mcp_servers/made")
    scenario.check("the API sees the server the form made",
                   listed.get("description") == "made in the console", listed)

    # Start it with the page's button; then watch the page change by itself.
    driver.find_element(By.ID, "start").click()
    wait_for_text(driver, "#server-state", "ready", LIVE)
    scenario.check("Start starts the server", True)
    driver.execute_script("window.consoleMarker = 'not reloaded';")
    api(parameters, "POST", "/api/mcp_servers/made/stop")
    wait_for_text(driver, "#server-state", "cold", LIVE)
    api(parameters, "POST", "/api/mcp_servers/made/start")
    wait_for_text(driver, "#server-state", "ready", LIVE)
    # Another window makes the server write to stderr, through the tool's own form.
    watched = driver.current_window_handle
    driver.switch_to.new_window("tab")
    driver.get(url(parameters, "/ui/tools/made__stderr"))
    wait_for(driver, "#tool-form", SHORT)
    driver.find_element(By.CSS_SELECTOR, "input[name='arg.lines']").send_keys("2")
    driver.find_element(By.CSS_SELECTOR, "input[name='arg.text']").send_keys(STDERR_TEXT)
    driver.find_element(By.ID, "call").click()
    wait_for(driver, "#call-result", LIVE)
    driver.close()
    driver.switch_to.window(watched)
    wait_for_text(driver, "#server-logs", STDERR_TEXT, LIVE)
    scenario.check("the state and the stderr tail changed on the open page without a reload",
                   driver.execute_script("return window.consoleMarker") == "not reloaded")
    inspect_page(scenario, driver, "server")

    # Call a tool from its form.
    driver.get(url(parameters, "/ui/tools"))
    wait_for(driver, "table", SHORT)
    inspect_page(scenario, driver, "tools")
    driver.get(url(parameters, "/ui/tools/made__add"))
    wait_for(driver, "#tool-form", SHORT)
    inputs = driver.find_elements(By.CSS_SELECTOR, "#tool-form input[name^='arg.']")
    for field, value in zip(inputs, ["19", "23"]):
        field.send_keys(value)
    driver.find_element(By.ID, "call").click()
    result = wait_for(driver, "#call-result", LIVE).text
    scenario.check("the tool's form calls it and shows the result", "42" in result, result)
    inspect_page(scenario, driver, "tool")

    # Approve a pending discovered definition.
    driver.get(url(parameters, "/ui/discovery"))
    wait_for(driver, f"[data-pending='{parameters['pending']}']", LIVE)
    inspect_page(scenario, driver, "discovery")
    driver.find_element(
        By.CSS_SELECTOR, f"[data-pending='{parameters['pending']}'] button.primary").click()
    wait_for_text(driver, ".notice", "approved", SHORT)
    approved = api(parameters, "GET", f"/api/mcp_servers/{parameters['pending']}")
    scenario.check("approving registers the discovered server",
                   approved.get("mcp_server_id") == parameters["pending"], approved)

    # Make a key, see it once, revoke it.
    driver.get(url(parameters, "/ui/access"))
    wait_for(driver, "#key-form", SHORT)
    driver.find_element(By.ID, "key-principal").send_keys("service:made-in-console")
    driver.find_element(By.ID, "key-name").send_keys("console-key")
    driver.find_element(By.ID, "create-key").click()
    raw = wait_for(driver, "#new-key", SHORT).text.strip()
    scenario.check("a new key is shown", raw.startswith("mcp_") and len(raw) > 20, raw)
    inspect_page(scenario, driver, "access")
    keys = api(parameters, "GET", "/api/auth/keys")["keys"]
    made = [key for key in keys if key["name"] == "console-key"]
    scenario.check("the API lists the key the console made", len(made) == 1, keys)
    driver.get(url(parameters, "/ui/access"))
    scenario.check("the raw key is never shown again", raw not in driver.page_source)
    row = driver.find_element(By.CSS_SELECTOR, f"[data-key='{made[0]['key_id']}']")
    driver.execute_script("window.confirm = () => true;")
    row.find_element(By.CSS_SELECTOR, "button.danger").click()
    wait_for_text(driver, ".notice", "revoked", SHORT)
    keys = api(parameters, "GET", "/api/auth/keys")["keys"]
    status = [key["status"] for key in keys if key["name"] == "console-key"]
    scenario.check("revoking in the console revokes the key", status == ["revoked"], keys)

    # A form without the CSRF token changes nothing.
    status = post_without_csrf(driver, "/ui/servers/made/stop")
    scenario.check("a form post without the CSRF token is refused", status == 403, status)
    state = api(parameters, "GET", "/api/mcp_servers/made")["state"]
    scenario.check("the refused post changed nothing", state == "ready", state)

    # The groups, events and configuration pages.
    driver.get(url(parameters, "/ui/groups"))
    wait_for(driver, "[data-group='pool']", SHORT)
    scenario.check("the groups page shows the group's member with its weight",
                   "demo" in driver.find_element(By.CSS_SELECTOR, "[data-group='pool']").text)
    inspect_page(scenario, driver, "groups")
    driver.find_element(By.CSS_SELECTOR, "[data-group='pool'] button").click()
    wait_for_text(driver, ".notice", "rebalanced", SHORT)
    driver.get(url(parameters, "/ui/events?mcp_server_ids=made"))
    wait_for_text(driver, "#live-state", "live", LIVE)
    api(parameters, "POST", "/api/mcp_servers/made/stop")
    wait_for(driver, "#event-rows tr[data-event-type='McpServerStopped']", LIVE)
    api(parameters, "POST", "/api/mcp_servers/made/start")
    wait_for(driver, "#event-rows tr[data-event-type='McpServerStarted']", LIVE)
    scenario.check("the events page shows the filtered stream as it happens", True)
    inspect_page(scenario, driver, "events")
    driver.get(url(parameters, "/ui/config"))
    wait_for(driver, "#reload", SHORT)
    inspect_page(scenario, driver, "config")
    driver.find_element(By.ID, "backup").click()
    backup = wait_for(driver, "#backup-result", SHORT).text
    scenario.check("a backup from the console names its file", ".bak1" in backup, backup)
    driver.find_element(By.ID, "reload").click()
    reloaded = wait_for(driver, "#reload-result", SHORT).text
    scenario.check("a reload from the console says what it changed", "Unchanged" in reloaded, reloaded)

    # Why is this denied: the viewer may list tools but not call them.
    driver.get(url(parameters, "/ui/access?principal=user:" + parameters["viewer_user"] + "&tool=made__echo"))
    answer = wait_for(driver, "#why-answer", SHORT).text
    scenario.check("why is this denied names the reason", "tool:invoke" in answer, answer)
    manage_access(scenario, driver, parameters)

    # The overview again, after the calls above: the charts show them.
    driver.get(url(parameters, "/ui/"))
    wait_for(driver, "#overview-live", SHORT)
    calls = int(wait_for(driver, "#calls-total", SHORT).text)
    scenario.check("the overview counts the calls made from the console", calls >= 2, calls)
    inspect_page(scenario, driver, "overview-after-calls")

    # An error page is a page too.
    driver.get(url(parameters, "/ui/servers/no-such-server"))
    wait_for(driver, "[data-error='McpServerNotFoundError']", SHORT)
    inspect_page(scenario, driver, "error")

    # Sign out: the session ends on the server too.
    driver.get(url(parameters, "/ui/servers"))
    wait_for(driver, "#server-rows", SHORT)
    old_session = driver.get_cookie("mcpgw_session")["value"]
    driver.find_element(By.CSS_SELECTOR, ".who button").click()
    wait_for_text(driver, ".notice", "signed out", SHORT)
    driver.add_cookie({"name": "mcpgw_session", "value": old_session, "path": "/"})
    driver.get(url(parameters, "/ui/servers"))
    wait_for(driver, "#key-form", SHORT)
    scenario.check("the old session cookie no longer opens a page", "/ui/login" in driver.current_url)


def viewer(scenario: Scenario, parameters: dict) -> None:
    driver = new_driver()
    # A custom role lets the viewer read the access page, and nothing more of it; a policy is
    # there for the forged delete to aim at.
    reader = f"user:{parameters['viewer_user']}"
    api(parameters, "POST", "/api/auth/roles",
        {"name": "access_reader", "description": "reads access", "permissions": ["auth:read"]})
    api(parameters, "POST", "/api/auth/roles/assign", {"principal": reader, "role": "access_reader"})
    api(parameters, "POST", "/api/auth/policies/provider/demo", {"deny_list": ["user:nobody"]})
    driver.get(url(parameters, "/ui/"))
    wait_for(driver, "#password-form", SHORT)
    driver.find_element(By.ID, "user_name").send_keys(parameters["viewer_user"])
    driver.find_element(By.ID, "password").send_keys("wrong password, long enough")
    driver.find_element(By.CSS_SELECTOR, "#password-form button[type=submit]").click()
    wait_for(driver, "#login-error", SHORT)
    scenario.check("a wrong password is refused", "/ui/login" in driver.current_url)
    driver.find_element(By.ID, "password").send_keys(parameters["viewer_password"])
    driver.find_element(By.CSS_SELECTOR, "#password-form button[type=submit]").click()
    wait_for_text(driver, ".who", f"user:{parameters['viewer_user']}", SHORT)
    scenario.check("a local user signs in with a password", True)
    driver.get(url(parameters, "/ui/servers"))
    wait_for(driver, "#server-rows", SHORT)
    buttons = driver.find_elements(By.CSS_SELECTOR, "main form[method=post] button")
    scenario.check("a viewer sees no button that changes anything", not buttons,
                   [button.text for button in buttons])
    scenario.check("a viewer is not offered to create a server",
                   not driver.find_elements(By.ID, "new-server"))
    inspect_page(scenario, driver, "servers-viewer")
    driver.get(url(parameters, f"/ui/servers/{parameters['demo']}"))
    wait_for(driver, "#server-live", SHORT)
    scenario.check("a viewer's server page has no start, stop, edit or delete",
                   not driver.find_elements(By.CSS_SELECTOR, "#start, #stop, #edit, #delete"))
    inspect_page(scenario, driver, "server-viewer")
    driver.get(url(parameters, "/ui/tools/pool__echo"))
    wait_for(driver, "#no-call", SHORT)
    scenario.check("a viewer is not offered to call a tool", not driver.find_elements(By.ID, "tool-form"))
    for path in (f"/ui/servers/{parameters['demo']}/stop", f"/ui/servers/{parameters['demo']}/delete",
                 "/ui/access/keys"):
        status = post_with_page_csrf(driver, path)
        scenario.check(f"a viewer's forged post to {path} is refused", status == 403, status)
    server = api(parameters, "GET", f"/api/mcp_servers/{parameters['demo']}")
    scenario.check("the forged posts changed nothing", server.get("mcp_server_id") == parameters["demo"])

    # The access page: readable, with no control that changes anything.
    driver.get(url(parameters, "/ui/access"))
    wait_for(driver, "#why-form", SHORT)
    forms = driver.find_elements(
        By.CSS_SELECTOR, "#key-form, #assign-form, #role-form, #policy-form, details[id^='edit-']")
    scenario.check("a reader of the access page is offered no form that changes access", not forms,
                   [form.get_attribute("id") for form in forms])
    buttons = driver.find_elements(By.CSS_SELECTOR, "main form[method=post] button")
    scenario.check("a reader of the access page sees no revoke or delete button", not buttons,
                   [button.text for button in buttons])
    inspect_page(scenario, driver, "access-viewer")
    # Forged posts that would give the viewer admin, take its role, make or widen a role, delete
    # one, or set or clear a policy: each refused, none changing anything.
    forgeries = [
        ("/ui/access/assignments", {"principal": reader, "role": "admin"}),
        ("/ui/access/assignments/revoke", {"principal": reader, "role": "access_reader"}),
        ("/ui/access/roles", {"name": "forged", "permissions": ["*"]}),
        ("/ui/access/roles/access_reader", {"description": "forged", "permissions": ["*"]}),
        ("/ui/access/roles/access_reader/delete", {}),
        ("/ui/access/policies", {"scope": "provider", "target_id": "demo", "deny_list": "user:root"}),
        ("/ui/access/policies/delete", {"scope": "provider", "target_id": "demo"}),
    ]
    for path, fields in forgeries:
        status = forge(driver, path, fields)
        scenario.check(f"a reader's forged post to {path} is refused", status == 403, status)
    roles = api(parameters, "GET", f"/api/auth/principals/roles?principal={reader}")["roles"]
    scenario.check("the forged posts assigned and revoked nothing",
                   sorted(held["role"] for held in roles) == ["access_reader", "viewer"], roles)
    role = api(parameters, "GET", "/api/auth/roles/access_reader")
    scenario.check("the forged posts left the role as it was",
                   role.get("permissions") == ["auth:read"] and role.get("description") == "reads access",
                   role)
    status, _ = api_status(parameters, "GET", "/api/auth/roles/forged")
    scenario.check("the forged post made no role", status == 404, status)
    policy = api(parameters, "GET", "/api/auth/policies/provider/demo")
    scenario.check("the forged posts left the policy as it was",
                   policy.get("deny_list") == ["user:nobody"], policy)


def sso(scenario: Scenario, parameters: dict) -> None:
    driver = new_driver()
    driver.get(url(parameters, "/ui/"))
    wait_for(driver, "#sso", SHORT)
    inspect_page(scenario, driver, "login-sso")
    driver.find_element(By.ID, "sso").click()
    wait_for_text(driver, ".who", f"user:{parameters['sso_user']}", LIVE)
    scenario.check("single sign-on goes through the provider and back, signed in", True)
    cookie = driver.get_cookie("mcpgw_session")
    scenario.check("single sign-on opens a session", bool(cookie))
    driver.get(url(parameters, "/ui/servers"))
    wait_for(driver, "#server-rows", SHORT)
    scenario.check("the provider's group grants its role: an mcp_server_admin may start servers",
                   bool(driver.find_elements(By.CSS_SELECTOR, "#server-rows button")))
    inspect_page(scenario, driver, "servers-sso")


SCENARIOS = {"admin": admin, "viewer": viewer, "sso": sso}


def main(scenario: Scenario) -> None:
    name, raw = scenario.args[0], scenario.args[1]
    SCENARIOS[name](scenario, json.loads(raw))


if __name__ == "__main__":
    run_scenario(main)
