// infrakit's web UI: live events, fresh counts, and the confirmation of
// the group verbs. Plain JavaScript; every page also works without it.
"use strict";

(function () {
  document.documentElement.classList.add("js");

  // The kinds of event watch records (website/watch.md). The stream names
  // each message by its kind, and a named message reaches only the
  // listeners of that name, so each is listened to (and unnamed messages
  // too, by onmessage).
  var KINDS = [
    "created", "destroyed", "replaced", "drained", "brake", "brake-released",
    "rate-limited", "vanished", "unhealthy", "expectation-expired",
    "roll-started", "roll-stopped", "roll-done", "provider-restart", "error",
    "reload", "synced", "leader", "lease", "autoscale"
  ];
  var MAX_EVENTS = 200;
  var TOKEN_KEY = "infrakit.token";

  var body = document.body;
  var lastSeq = Number(body.dataset.lastSeq || 0);
  var onlyGroup = body.dataset.group || "";

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function two(n) { return (n < 10 ? "0" : "") + n; }

  // eventItem builds the list item the server renders for an event
  // (templates/parts.html, "event").
  function eventItem(e) {
    var li = el("li", "event fresh kind-" + e.kind);
    li.dataset.seq = String(e.seq);
    li.dataset.kind = e.kind;
    var t = new Date(e.time);
    var time = el("time", "", two(t.getUTCHours()) + ":" + two(t.getUTCMinutes()) + ":" + two(t.getUTCSeconds()));
    var iso = isNaN(t) ? "" : t.toISOString().replace(/\.\d+Z$/, "Z");
    time.setAttribute("datetime", iso);
    time.title = iso;
    li.appendChild(time);
    li.appendChild(document.createTextNode(" "));
    li.appendChild(el("span", "kind", String(e.kind).replace(/-/g, " ")));
    if (e.group) {
      li.appendChild(document.createTextNode(" "));
      var a = el("a", "", e.group);
      a.href = "/groups/" + encodeURIComponent(e.group);
      li.appendChild(a);
    }
    if (e.instance) {
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("code", "", e.instance));
    }
    if (e.provider) {
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", "provider", e.provider));
    }
    if (e.reason) {
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", "reason", "(" + e.reason + ")"));
    }
    li.appendChild(document.createTextNode(" "));
    li.appendChild(el("span", "msg", e.message || ""));
    return li;
  }

  function addEvent(e) {
    if (!e || typeof e.seq !== "number" || e.seq <= lastSeq) return;
    lastSeq = e.seq;
    body.dataset.lastSeq = String(lastSeq);
    scheduleRefresh();
    if (onlyGroup && e.group !== onlyGroup) return;
    var list = document.getElementById("events");
    if (!list) return;
    list.insertBefore(eventItem(e), list.firstChild);
    while (list.children.length > MAX_EVENTS) list.removeChild(list.lastChild);
    var empty = document.getElementById("events-empty");
    if (empty) empty.hidden = true;
  }

  function setLive(state, text) {
    body.dataset.live = state;
    var t = document.getElementById("live-text");
    if (t) t.textContent = text;
  }

  function listen() {
    if (!body.dataset.live || !window.EventSource) return;
    var es = new EventSource("/v1/events?after=" + lastSeq);
    var handle = function (msg) {
      try { addEvent(JSON.parse(msg.data)); } catch (err) { /* not an event */ }
    };
    KINDS.forEach(function (k) { es.addEventListener(k, handle); });
    es.onmessage = handle;
    es.onopen = function () { setLive("open", "Live: new events appear as they happen"); };
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) {
        setLive("closed", "Live updates stopped; reload the page to resume");
      } else {
        setLive("retrying", "Reconnecting to the event stream…");
      }
    };
  }

  // Refresh: fetch this page again and swap in its [data-refresh]
  // sections (counts, tables), keeping the focus where it was.
  var refreshTimer = null, refreshing = false, again = false;

  function scheduleRefresh() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(function () { refreshTimer = null; refresh(); }, 250);
  }

  function refresh() {
    if (!document.querySelector("[data-refresh]")) return Promise.resolve();
    if (refreshing) { again = true; return Promise.resolve(); }
    refreshing = true;
    body.dataset.refreshing = "true";
    return fetch(location.pathname + location.search, {
      headers: { "Accept": "text/html" }, credentials: "same-origin", cache: "no-store"
    }).then(function (resp) {
      if (!resp.ok) throw new Error("status " + resp.status);
      return resp.text();
    }).then(function (html) {
      var fresh = new DOMParser().parseFromString(html, "text/html");
      var focused = document.activeElement && document.activeElement.id;
      document.querySelectorAll("[data-refresh][id]").forEach(function (old) {
        var next = fresh.getElementById(old.id);
        if (next) old.replaceWith(document.importNode(next, true));
      });
      if (focused && document.activeElement === document.body) {
        var f = document.getElementById(focused);
        if (f) f.focus();
      }
      body.dataset.refreshed = String(Date.now());
    }).catch(function () { /* the next event or timer tries again */ })
      .then(function () {
        refreshing = false;
        delete body.dataset.refreshing;
        if (again) { again = false; scheduleRefresh(); }
      });
  }

  // The verbs: each form.verb asks for confirmation and the token in the
  // dialog, then posts to the API with the token as the credential.
  var dialog = document.getElementById("confirm-dialog");
  var pending = null;

  function question(form) {
    var q = form.dataset.question || "Are you sure?";
    if (form.elements.size) q = q.replace("{size}", form.elements.size.value);
    return q;
  }

  function verbBody(form) {
    switch (form.dataset.verb) {
      case "scale":
        return { size: parseInt(form.elements.size.value, 10) };
      case "destroy-instances":
        return { ids: Array.prototype.map.call(form.querySelectorAll('input[name="id"]'), function (i) { return i.value; }) };
    }
    return {};
  }

  function ask(form, message) {
    if (!dialog || typeof dialog.showModal !== "function") return false;
    pending = form;
    document.getElementById("confirm-question").textContent = question(form);
    document.getElementById("confirm-consequence").textContent = form.dataset.consequence || "";
    document.getElementById("confirm-ok").textContent = form.dataset.button || "Confirm";
    var err = document.getElementById("confirm-error");
    err.textContent = message || "";
    err.hidden = !message;
    var token = document.getElementById("confirm-token");
    var kept = null;
    try { kept = sessionStorage.getItem(TOKEN_KEY); } catch (e) { /* storage off */ }
    token.value = kept || "";
    dialog.showModal();
    if (token.value) document.getElementById("confirm-ok").focus(); else token.focus();
    return true;
  }

  function resultArea() { return document.getElementById("verb-result"); }

  function showOutcome(state, title, out, errText) {
    var area = resultArea();
    if (!area) return;
    area.textContent = "";
    var box = el("div", "outcome " + state);
    box.appendChild(el("p")).appendChild(el("strong", "", title));
    if (out) box.appendChild(el("pre", "stdout", out));
    if (errText) box.appendChild(el("pre", "stderr", errText));
    area.appendChild(box);
  }

  function run(form, token) {
    var button = form.querySelector('button[type="submit"]');
    var q = question(form);
    if (button) button.disabled = true;
    body.dataset.verb = "running";
    showOutcome("running", "Running: " + q);
    fetch(form.dataset.api, {
      method: "POST",
      headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify(verbBody(form)),
      credentials: "omit"
    }).then(function (resp) {
      return resp.json().catch(function () { return {}; }).then(function (doc) {
        if (resp.status === 401) {
          try { sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* storage off */ }
          showOutcome("failed", "Not done: the token was refused");
          ask(form, "That is not this watch's API token.");
          return;
        }
        if (!resp.ok) {
          var e = doc.error || {};
          var summary = typeof e === "string" ? e : (e.summary || ("HTTP " + resp.status));
          showOutcome("failed", "Not done: " + summary, "", typeof e === "string" ? "" : (e.detail || ""));
          return;
        }
        try { sessionStorage.setItem(TOKEN_KEY, token); } catch (e2) { /* storage off */ }
        var code = doc.exit_code || 0;
        showOutcome(code ? "failed" : "done", (code ? "Failed (exit " + code + "): " : "Done: ") + q, doc.stdout, doc.stderr);
      });
    }).catch(function (err) {
      showOutcome("failed", "Not done: " + err);
    }).then(function () {
      if (button) button.disabled = false;
      return refresh();
    }).then(function () {
      body.dataset.verb = "done";
    });
  }

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form === document.getElementById("confirm-form")) {
      ev.preventDefault();
      var token = document.getElementById("confirm-token").value.trim();
      if (!token) {
        var err = document.getElementById("confirm-error");
        err.textContent = "Enter the API token.";
        err.hidden = false;
        return;
      }
      var f = pending;
      pending = null;
      dialog.close();
      if (f) run(f, token);
      return;
    }
    if (form.classList && form.classList.contains("verb") && form.dataset.api) {
      if (!form.reportValidity()) { ev.preventDefault(); return; }
      if (ask(form)) ev.preventDefault();
      // Without <dialog>, the form posts and the server asks instead.
    }
  });

  var cancel = document.getElementById("confirm-cancel");
  if (cancel) cancel.addEventListener("click", function () { pending = null; dialog.close(); });

  listen();
  // Times ("5s ago") and counts age even when nothing happens.
  setInterval(function () { if (document.visibilityState === "visible") scheduleRefresh(); }, 30000);
})();
