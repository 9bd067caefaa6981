// The console's own script. It does four small things and nothing else:
// - listens to the gateway's event stream (/api/ws/events, opened with the session cookie, when
//   the session may read it) and tells the page when servers changed, so that the parts marked with
//   hx-trigger="mcpgw-servers from:body" fetch themselves again;
// - on the events page, shows the event stream as it happens (text only, never markup);
// - asks for confirmation before a form marked data-confirm is sent;
// - shows the connection state of the live view.
// Pages work without it: they are plain HTML forms and links.
(function () {
  "use strict";

  var SERVER_EVENTS = [
    "McpServerRegistered", "McpServerUpdated", "McpServerRemoved", "McpServerStateChanged",
    "McpServerStarted", "McpServerStartFailed", "McpServerStopped", "McpServerCrashed",
    "McpServerToolsChanged", "HealthCheckFailed", "GroupStateChanged",
    "GroupMemberHealthChanged", "DiscoveryServerPending", "DiscoveryServerApproved",
    "DiscoveryServerRejected"
  ];

  function announce(name) {
    document.body.dispatchEvent(new CustomEvent(name, { bubbles: true }));
  }

  var pending = null;
  function serversChanged() {
    if (pending !== null) {
      return;
    }
    pending = window.setTimeout(function () {
      pending = null;
      announce("mcpgw-servers");
    }, 150);
  }

  function setLive(text, state) {
    var badge = document.getElementById("live-state");
    if (badge) {
      badge.textContent = text;
      badge.setAttribute("data-state", state);
    }
  }

  var delay = 1000;
  function connect() {
    if (!document.querySelector("[data-live]")) {
      return;
    }
    var main = document.getElementById("main");
    if (!main || main.getAttribute("data-events") !== "on") {
      // The session may not read the event stream: the page polls instead.
      setLive("refreshes every few seconds", "off");
      return;
    }
    var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    var url = scheme + "//" + window.location.host + "/api/ws/events?event_types=" +
      SERVER_EVENTS.join(",");
    var socket;
    try {
      socket = new WebSocket(url);
    } catch (error) {
      setLive("offline", "off");
      return;
    }
    socket.onopen = function () {
      delay = 1000;
      setLive("live", "on");
      // Whatever happened while the stream was down is fetched now.
      announce("mcpgw-servers");
    };
    socket.onmessage = function (message) {
      var event;
      try {
        event = JSON.parse(message.data);
      } catch (error) {
        return;
      }
      if (event && typeof event.event_type === "string") {
        serversChanged();
      }
    };
    socket.onclose = function () {
      setLive("reconnecting", "off");
      window.setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }

  // The events page: every event the filter lets through becomes a row, newest first.
  var KEPT_EVENTS = 200;
  function streamEvents(rows) {
    var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    var query = [];
    var types = rows.getAttribute("data-event-types");
    var servers = rows.getAttribute("data-server-ids");
    if (types) {
      query.push("event_types=" + encodeURIComponent(types));
    }
    if (servers) {
      query.push("mcp_server_ids=" + encodeURIComponent(servers));
    }
    var socket = new WebSocket(scheme + "//" + window.location.host + "/api/ws/events" +
      (query.length ? "?" + query.join("&") : ""));
    socket.onopen = function () {
      delay = 1000;
      setLive("live", "on");
    };
    socket.onmessage = function (message) {
      var event;
      try {
        event = JSON.parse(message.data);
      } catch (error) {
        return;
      }
      if (!event || typeof event.event_type !== "string") {
        return;
      }
      var placeholder = rows.querySelector(".placeholder");
      if (placeholder) {
        placeholder.remove();
      }
      var row = document.createElement("tr");
      var details = {};
      Object.keys(event).forEach(function (key) {
        if (["event_type", "event_id", "occurred_at", "mcp_server_id"].indexOf(key) < 0) {
          details[key] = event[key];
        }
      });
      [event.occurred_at || "", event.event_type, event.mcp_server_id || event.group_id || "",
        JSON.stringify(details)].forEach(function (text, index) {
        var cell = document.createElement("td");
        cell.textContent = text;
        if (index === 3) {
          cell.className = "hide-narrow mono";
        }
        row.appendChild(cell);
      });
      row.setAttribute("data-event-type", event.event_type);
      rows.insertBefore(row, rows.firstChild);
      while (rows.children.length > KEPT_EVENTS) {
        rows.removeChild(rows.lastChild);
      }
    };
    socket.onclose = function () {
      setLive("reconnecting", "off");
      window.setTimeout(function () { streamEvents(rows); }, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  }, true);

  function start() {
    var rows = document.querySelector("[data-event-stream]");
    if (rows) {
      streamEvents(rows);
    } else {
      connect();
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
