// subsync operator console. Plain JavaScript, no libraries, no inline code (the page's
// Content-Security-Policy allows only this file). Every value from the service is put in the
// page as text (textContent / createTextNode), never parsed as HTML.
"use strict";

(() => {
  const KEY = "subsync.console.adminKey";
  const ACTOR = "subsync.console.actor";
  const KEY_NAME = "subsync.console.key-name";
  const $ = (id) => document.getElementById(id);
  let healthTimer = null;

  // ---- DOM helpers -------------------------------------------------------------------------

  /** An element with attributes (`class`, `on<event>` handlers, others as attributes) and children (nodes or text). */
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  function svg(tag, attributes) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
    return node;
  }

  // Whether and how an entitlement renews: the date and, when it differs, the product it renews
// to (a pending upgrade, downgrade or crossgrade).
function renewsText(e) {
  if (!e.will_renew) return "no";
  let text = "yes";
  if (e.renewal_date) text += ", " + time(e.renewal_date);
  if (e.renewal_product_id && e.renewal_product_id !== e.product_id) text += ", to " + e.renewal_product_id;
  return text;
}

// What the store's renewal info says beyond renewing: why the subscription ended, a price increase.
function storeSaysText(e) {
  const parts = [];
  if (e.expiration_reason) parts.push("ended: " + e.expiration_reason.replace(/_/g, " "));
  if (e.grace_period_expires_at) parts.push("grace until " + time(e.grace_period_expires_at));
  if (e.price_increase_status) parts.push("price increase " + e.price_increase_status);
  return parts.length ? parts.join("; ") : "—";
}

function time(text) {
    if (!text) return "—";
    return String(text).replace("T", " ").replace(/\.\d+Z$/, "Z");
  }

  function pill(status) {
    return el("span", { class: "pill " + String(status).replace(/[^a-z_]/g, "") }, status);
  }

  function table(headers, rows, attributes) {
    return el("table", attributes || {},
      el("thead", {}, el("tr", {}, headers.map((header) => el("th", {}, header)))),
      el("tbody", {}, rows));
  }

  function keyValues(pairs, attributes) {
    return el("dl", Object.assign({ class: "kv" }, attributes || {}),
      pairs.flatMap(([key, value]) => [el("dt", {}, key), el("dd", {}, value)]));
  }

  function status(message, bad) {
    const line = $("status-line");
    line.hidden = !message;
    line.className = bad ? "status bad" : "status";
    line.textContent = message || "";
  }

  // ---- The admin API -----------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message || code || "HTTP " + status);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const key = sessionStorage.getItem(KEY);
    if (!key) {
      showLogin();
      throw new ApiError(401, "unauthenticated", "sign in first");
    }
    const headers = { "Authorization": "Bearer " + key };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer", redirect: "error",
      });
    } catch (error) {
      throw new ApiError(0, "network", "the service did not answer (" + error.message + ")");
    }
    let data = null;
    if (response.status !== 204) {
      try { data = await response.json(); } catch (error) { data = null; }
    }
    const detail = (data && data.error) || {};
    if (response.status === 401 || response.status === 403) {
      sessionStorage.removeItem(KEY);
      showLogin("The admin key was refused (" + response.status + " " + (detail.code || "") + "). Sign in again with the right key.");
      throw new ApiError(response.status, detail.code, detail.message);
    }
    if (!response.ok) throw new ApiError(response.status, detail.code, detail.message);
    return data;
  }

  function actor() { return sessionStorage.getItem(ACTOR) || "console"; }

  // Who the audit log records (whoami's records_as): the key's name with the name typed at
  // sign-in beside it, or, for the shared key alone, the name typed at sign-in.
  function signedInAs() {
    const key = sessionStorage.getItem(KEY_NAME);
    if (!key) return actor();
    return actor() === key ? key : key + " (" + actor() + ")";
  }

  // ---- Sign in -----------------------------------------------------------------------------

  function showLogin(message) {
    stopHealthTimer();
    for (const id of ["account-view", "health-view", "endpoints-view"]) $(id).hidden = true;
    $("nav").hidden = true;
    status("");
    $("login-view").hidden = false;
    $("login-error").hidden = !message;
    $("login-error").textContent = message || "";
    $("login-key").value = "";
    $("login-key").focus();
  }

  async function signIn(event) {
    event.preventDefault();
    const key = $("login-key").value.trim();
    const name = $("login-actor").value.trim();
    if (!key || !name) return;
    $("login-submit").disabled = true;
    $("login-error").hidden = true;
    try {
      // Any admin route checks the key; whoami also names it.
      const response = await fetch("/v1/admin/whoami", {
        headers: { "Authorization": "Bearer " + key }, credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer",
      });
      if (response.status === 401 || response.status === 403) {
        $("login-error").textContent = "Wrong admin key: the service refused it (" + response.status + "). Nothing was stored.";
        $("login-error").hidden = false;
        return;
      }
      if (!response.ok) {
        $("login-error").textContent = "The service answered " + response.status + "; try again shortly.";
        $("login-error").hidden = false;
        return;
      }
      const who = await response.json();
      sessionStorage.setItem(KEY, key);
      if (who.records_as) sessionStorage.setItem(KEY_NAME, who.records_as);
      else sessionStorage.removeItem(KEY_NAME);
      sessionStorage.setItem(ACTOR, name);
      $("login-key").value = "";
      $("login-view").hidden = true;
      route();
    } catch (error) {
      $("login-error").textContent = "The service did not answer: " + error.message;
      $("login-error").hidden = false;
    } finally {
      $("login-submit").disabled = false;
    }
  }

  function signOut() {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(KEY_NAME);
    sessionStorage.removeItem(ACTOR);
    location.hash = "#/account";
    showLogin();
  }

  // ---- Routing -----------------------------------------------------------------------------

  function route() {
    if (!sessionStorage.getItem(KEY)) { showLogin(); return; }
    $("login-view").hidden = true;
    $("nav").hidden = false;
    $("signed-in-as").textContent = "signed in as " + signedInAs();
    const parts = location.hash.replace(/^#\/?/, "").split("/");
    const page = ["account", "health", "endpoints"].includes(parts[0]) ? parts[0] : "account";
    for (const name of ["account", "health", "endpoints"]) {
      $(name + "-view").hidden = name !== page;
      $("nav-" + name).className = name === page ? "current" : "";
    }
    status("");
    stopHealthTimer();
    if (page === "account") {
      const accountID = parts.length > 1 ? decodeURIComponent(parts.slice(1).join("/")) : "";
      if (accountID) loadAccount(accountID); else { $("account-details").replaceChildren(); $("account-search-input").focus(); }
    } else if (page === "health") {
      loadHealth();
      healthTimer = setInterval(loadHealth, 10000);
    } else {
      loadEndpoints();
    }
  }

  function stopHealthTimer() {
    if (healthTimer) clearInterval(healthTimer);
    healthTimer = null;
  }

  function failed(error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) return;
    status((error.code ? error.code + ": " : "") + error.message, true);
  }

  // ---- Confirmation ------------------------------------------------------------------------

  /** Asks before an action; resolves with the reason typed (or "" when none is asked), or null when cancelled. */
  function confirmAction(title, text, askReason) {
    const dialog = $("confirm-dialog");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    $("confirm-reason-label").hidden = !askReason;
    $("confirm-reason").value = "";
    $("confirm-error").hidden = true;
    return new Promise((resolve) => {
      const finish = (value) => {
        $("confirm-ok").onclick = null;
        $("confirm-cancel").onclick = null;
        dialog.onclose = null;
        if (dialog.open) dialog.close();
        resolve(value);
      };
      $("confirm-ok").onclick = () => {
        const reason = $("confirm-reason").value.trim();
        if (askReason && !reason) {
          $("confirm-error").textContent = "Say why: the reason is recorded with the action.";
          $("confirm-error").hidden = false;
          return;
        }
        finish(reason);
      };
      $("confirm-cancel").onclick = () => finish(null);
      dialog.onclose = () => finish(null);
      dialog.showModal();
      (askReason ? $("confirm-reason") : $("confirm-ok")).focus();
    });
  }

  /** Shows what an action recorded: every field of the answer. */
  function actionRecord(title, record, id) {
    const pairs = Object.entries(record).map(([key, value]) => [key,
      value !== null && typeof value === "object" ? JSON.stringify(value) : (value === null ? "—" : String(value))]);
    return el("div", { class: "notice action-record", id }, el("strong", {}, title), keyValues(pairs));
  }

  // ---- Account page ------------------------------------------------------------------------

  async function search(event) {
    event.preventDefault();
    const query = $("account-search-input").value.trim();
    if (!query) return;
    const results = $("account-search-results");
    results.replaceChildren();
    try {
      const answer = await api("GET", "/v1/admin/accounts?q=" + encodeURIComponent(query));
      if (answer.matches.length === 0) {
        results.appendChild(el("li", { class: "muted" }, "No account matches " + query + "."));
        return;
      }
      if (answer.matches.length === 1) {
        openAccount(answer.matches[0].account_id);
        return;
      }
      for (const match of answer.matches) {
        results.appendChild(el("li", {},
          el("button", { type: "button", class: "search-result", onclick: () => openAccount(match.account_id) },
            match.account_id + " (" + (match.tier || "unresolved") + "; by " + match.matched_by.join(", ") + ")")));
      }
    } catch (error) { failed(error); }
  }

  function openAccount(accountID) {
    const hash = "#/account/" + encodeURIComponent(accountID);
    if (location.hash === hash) loadAccount(accountID); else location.hash = hash;
  }

  async function loadAccount(accountID, record) {
    const target = $("account-details");
    try {
      const answer = await api("GET", "/v1/admin/accounts/" + encodeURIComponent(accountID));
      $("account-search-results").replaceChildren();
      target.replaceChildren(renderAccount(answer, record));
    } catch (error) {
      if (error.code === "account_not_found") {
        target.replaceChildren(el("p", { class: "error", id: "account-missing" }, "Nothing is stored for account " + accountID + "."));
      } else failed(error);
    }
  }

  function renderAccount(answer, record) {
    const account = answer.account;
    const state = account.state;
    const id = account.account_id;
    const reload = (newRecord) => loadAccount(id, newRecord);
    const summary = keyValues([
      ["Account", el("span", { class: "mono", id: "account-id" }, id)],
      ["Tier", el("strong", { id: "account-tier" }, state.tier)],
      ["Ads", state.ads ? "shown" : "not shown"],
      ["Resolved at", time(account.resolved_at)],
      ["Last sequence", String(account.last_sequence)],
      ["Pending reports", String(account.pending_reports)],
      ["Next change by time", time(state.next_transition_at)],
    ]);
    const entitlements = table(
      ["Entitlement", "Status", "Product", "Expires", "Source transaction", "Renews", "Store says"],
      state.entitlements.map((e) => el("tr", { "data-entitlement": e.id },
        el("td", {}, e.id), el("td", {}, pill(e.status)), el("td", {}, e.product_id), el("td", {}, time(e.expires_at)),
        el("td", { class: "mono" }, e.source_transaction_id), el("td", { "data-field": "renews" }, renewsText(e)),
        el("td", { "data-field": "store-says" }, storeSaysText(e)))),
      { id: "entitlements" });
    const features = el("ul", { id: "features" }, state.features.map((feature) => el("li", {}, feature)));
    const limits = table(["Limit", "Value"], Object.entries(state.limits).sort().map(([name, value]) =>
      el("tr", {}, el("td", {}, name), el("td", { class: "num" }, value === null ? "unlimited" : String(value)))));
    const usage = table(["Meter", "Used", "Allowance", "Rewards", "Credits", "Available"],
      (account.usage || []).map((balance) => {
        const current = balance.current || {};
        return el("tr", {}, el("td", {}, balance.meter), el("td", { class: "num" }, String(current.used ?? 0)),
          el("td", { class: "num" }, current.allowance === null || current.allowance === undefined ? "unlimited" : String(current.allowance)),
          el("td", { class: "num" }, String(balance.rewards)), el("td", { class: "num" }, String(balance.credits)),
          el("td", { class: "num" }, balance.available === null || balance.available === undefined ? "unlimited" : String(balance.available)));
      }), { id: "usage" });
    const transactions = table(
      ["Transaction", "Original", "Product", "Expires", "Revoked", "Reports", "Action"],
      account.transactions.map((t) => {
        const action = t.revoked ? "unrevoke" : "revoke";
        const button = el("button", {
          type: "button", class: t.revoked ? "unrevoke-button" : "revoke-button danger", "data-transaction": t.transaction_id,
          onclick: async () => {
            const reason = await confirmAction(
              (t.revoked ? "Unrevoke" : "Revoke") + " transaction " + t.transaction_id + "?",
              "Recorded as an admin report by " + actor() + " and resolved at once: the account's state changes, events and webhooks follow.",
              true);
            if (reason === null) return;
            try {
              const result = await api("POST", "/v1/admin/accounts/" + encodeURIComponent(id) + "/" + action,
                { transaction_id: t.transaction_id, reason, actor: actor() });
              reload({ title: (result.recorded ? "Recorded " : "Nothing to record: ") + action, body: result });
            } catch (error) { failed(error); }
          },
        }, t.revoked ? "Unrevoke" : "Revoke");
        return el("tr", { "data-transaction": t.transaction_id },
          el("td", { class: "mono" }, t.transaction_id), el("td", { class: "mono" }, t.original_transaction_id),
          el("td", {}, t.product_id), el("td", {}, time(t.expires_at)), el("td", {}, t.revoked ? pill("revoked") : "no"),
          el("td", { class: "num" }, String(t.report_count)), el("td", {}, button));
      }), { id: "transactions" });
    const reconcile = (dryRun) => async () => {
      if (!dryRun) {
        const ok = await confirmAction("Repair account " + id + "?",
          "Re-resolves the account from its stored reports if they disagree with what is persisted; consumers get the events they need.", false);
        if (ok === null) return;
      }
      try {
        const result = await api("POST", "/v1/admin/accounts/" + encodeURIComponent(id) + "/reconcile", { dry_run: dryRun, actor: actor() });
        reload({ title: dryRun ? "Reconcile (dry run): " + result.differences.length + " differences" : "Reconcile (repair)", body: result });
      } catch (error) { failed(error); }
    };
    // The App Store's own answer (docs/STORE.md), when the server can ask it.
    const reconcileStore = (dryRun) => async () => {
      if (!dryRun) {
        const ok = await confirmAction("Repair account " + id + " from the App Store?",
          "Writes the store's version of every purchase that differs as a verified store report; the workers resolve it and consumers get the events.", false);
        if (ok === null) return;
      }
      try {
        const result = await api("POST", "/v1/admin/accounts/" + encodeURIComponent(id) + "/reconcile-store", { dry_run: dryRun, actor: actor() });
        reload({
          title: dryRun
            ? "App Store check: " + result.differences.length + " differences"
            : "App Store repair: " + result.reports_submitted + " store reports submitted",
          body: result,
        });
      } catch (error) { failed(error); }
    };
    const actions = el("div", { class: "buttons" },
      el("button", { type: "button", id: "reconcile-dry-run", onclick: reconcile(true) }, "Reconcile (dry run)"),
      el("button", { type: "button", id: "reconcile-repair", class: "danger", onclick: reconcile(false) }, "Reconcile and repair"),
      answer.app_store ? el("button", { type: "button", id: "reconcile-store-dry-run", onclick: reconcileStore(true) }, "Check with the App Store") : null,
      answer.app_store ? el("button", { type: "button", id: "reconcile-store-repair", class: "danger", onclick: reconcileStore(false) }, "Repair from the App Store") : null,
      el("button", { type: "button", id: "account-reload", onclick: () => reload() }, "Reload"));
    return el("div", {},
      record ? actionRecord(record.title, record.body, "audit-record") : null,
      el("div", { class: "columns" },
        el("div", {}, el("h3", {}, "State"), summary, el("h3", {}, "Features"), features),
        el("div", {}, el("h3", {}, "Limits"), limits, el("h3", {}, "Usage"), usage)),
      el("h3", {}, "Entitlements"), entitlements,
      el("h3", {}, "Transactions"), transactions,
      el("h3", {}, "Actions"), actions,
      el("h3", {}, "Timeline ", el("span", { class: "muted" }, "(oldest first)")),
      renderTimeline(answer.timeline, reload),
      el("h3", {}, "Devices"),
      table(["Device", "Platform", "App version", "First seen", "Last seen"], account.devices.map((d) =>
        el("tr", {}, el("td", { class: "mono" }, d.id), el("td", {}, d.platform || "—"), el("td", {}, d.app_version || "—"),
          el("td", {}, time(d.first_seen_at)), el("td", {}, time(d.last_seen_at))))));
  }

  function renderTimeline(entries, reload) {
    const rows = entries.map((entry) => {
      let what; let detail;
      if (entry.kind === "report") {
        const r = entry.report;
        what = [r.source === "admin" ? "admin " + (r.admin_action || "report") : r.source + " report", " ", pill(r.status), r.verified ? " verified" : " unverified"];
        detail = [
          "device ", el("span", { class: "mono" }, r.device_id), " · transaction ", el("span", { class: "mono" }, r.transaction_id),
          " · ", r.product_id, r.expires_at ? " · expires " + time(r.expires_at) : "", r.revoked_at ? " · revoked " + time(r.revoked_at) : "",
          r.admin_actor ? " · by " + r.admin_actor : "", r.admin_reason ? " · why: " + r.admin_reason : "",
          r.last_error ? " · error: " + r.last_error : "",
        ];
      } else if (entry.kind === "resolution") {
        const s = entry.resolution;
        what = ["resolved (" + s.by + ")"];
        detail = [s.report_ids.length + " report(s) joined into " + s.transaction_ids.join(", ")];
      } else if (entry.kind === "event") {
        const e = entry.event;
        what = ["event #" + e.sequence + " ", el("strong", {}, e.type)];
        detail = [
          "origin " + e.origin, e.entitlement_id ? " · " + e.entitlement_id : "",
          " · deliveries: " + (Object.entries(e.deliveries).map(([k, v]) => k + " " + v).join(", ") || "none"),
        ];
      } else if (entry.kind === "action") {
        const a = entry.action;
        what = ["operator ", el("strong", {}, a.action.replace(/_/g, " "))];
        detail = [
          "by " + a.actor, a.target ? " · " + a.target : "", " · " + a.outcome,
          a.reason ? " · why: " + a.reason : "", " · audit #" + a.id,
        ];
      } else {
        const d = entry.delivery;
        const delivery = d.delivery;
        const buttons = [];
        if (delivery.status !== "succeeded") {
          buttons.push(el("button", { type: "button", class: "retry-delivery", "data-delivery": delivery.delivery_id, onclick: () =>
            deliveryAction("retry", delivery, (result) => reload({ title: "Delivery retried", body: result })) }, "Retry"));
        }
        if (delivery.status === "pending") {
          buttons.push(el("button", { type: "button", class: "cancel-delivery danger", "data-delivery": delivery.delivery_id, onclick: () =>
            deliveryAction("cancel", delivery, (result) => reload({ title: "Delivery cancelled", body: result })) }, "Cancel"));
        }
        what = ["delivery #" + delivery.delivery_id + " of event #" + delivery.event_sequence + " ", pill(delivery.status)];
        detail = [
          "to ", el("span", { class: "mono" }, d.endpoint_url), " · " + delivery.attempts + " attempt(s)",
          delivery.status === "pending" ? " · next " + time(delivery.next_attempt_at) : "", " ", buttons,
          el("ol", { class: "attempts" }, d.attempts.map((a) => el("li", {},
            time(a.attempted_at) + " · " + (a.status_code ? "HTTP " + a.status_code : "no answer") +
            (a.latency_ms !== null && a.latency_ms !== undefined ? " · " + a.latency_ms + " ms" : "") + (a.error ? " · " + a.error : "")))),
        ];
      }
      return el("tr", { class: "kind-" + entry.kind, "data-kind": entry.kind }, el("td", { class: "mono" }, time(entry.at)),
        el("td", {}, what), el("td", {}, detail));
    });
    return table(["When", "What", "Details"], rows, { id: "timeline", class: "timeline" });
  }

  async function deliveryAction(action, delivery, done) {
    const reason = await confirmAction(
      (action === "retry" ? "Retry" : "Cancel") + " delivery #" + delivery.delivery_id + "?",
      action === "retry"
        ? "It becomes due now with a fresh set of attempts; later events of the account to this endpoint follow it."
        : "It is given up for good; later events of the account to this endpoint go out.", false);
    if (reason === null) return;
    try {
      done(await api("POST", "/v1/admin/deliveries/" + delivery.delivery_id + "/" + action, { actor: actor() }));
    } catch (error) { failed(error); }
  }

  // ---- Health page -------------------------------------------------------------------------

  async function loadHealth() {
    try {
      const [stats, history] = await Promise.all([
        api("GET", "/v1/admin/stats?window_seconds=3600"), api("GET", "/v1/admin/metrics/history")]);
      const last = history.samples[history.samples.length - 1] || {};
      const rate = last.reports_resolved_per_second;
      const card = (id, value, label) => el("div", { class: "card", id }, el("div", { class: "value" }, value), el("div", { class: "label" }, label));
      $("health-numbers").replaceChildren(
        card("health-inbox-depth", String(stats.pending_reports), "reports pending"),
        card("health-oldest-pending", stats.oldest_pending_age_seconds.toFixed(1) + " s", "oldest pending (resolution lag)"),
        card("health-resolution-rate", rate === undefined || rate === null ? "—" : rate.toFixed(1) + "/s", "reports resolved (last sample)"),
        card("health-quarantined", String(stats.quarantined_reports), "quarantined reports"),
        card("health-accounts", String(Object.values(stats.accounts_by_tier).reduce((a, b) => a + b, 0)), "accounts"));
      $("health-deliveries").replaceChildren(table(["Status", "Deliveries"],
        Object.entries(stats.deliveries_by_status).sort().map(([name, count]) =>
          el("tr", {}, el("td", {}, pill(name)), el("td", { class: "num" }, String(count)))), { id: "health-deliveries-table" }));
      const ms = (value) => value === null || value === undefined ? "—" : Math.round(value) + " ms";
      $("health-endpoints").replaceChildren(table(
        ["Endpoint", "Enabled", "Attempts", "Success rate", "p50", "p99", "Failing since"],
        stats.endpoints.map((e) => el("tr", {},
          el("td", { class: "mono" }, e.url), el("td", {}, e.enabled ? "yes" : "no" + (e.disabled_reason ? " (" + e.disabled_reason + ")" : "")),
          el("td", { class: "num" }, String(e.attempts)),
          el("td", { class: "num" }, e.success_rate === null ? "—" : (e.success_rate * 100).toFixed(1) + " %"),
          el("td", { class: "num" }, ms(e.p50_latency_ms)), el("td", { class: "num" }, ms(e.p99_latency_ms)),
          el("td", {}, e.failing_since ? el("span", { class: "error" }, time(e.failing_since)) : "—"))),
        { id: "health-endpoints-table" }));
      $("health-chart").replaceChildren(chart(history));
    } catch (error) { failed(error); }
  }

  /** The last hour as lines: inbox depth, reports resolved per second and resolution lag, each scaled to its own maximum. */
  function chart(history) {
    const width = 760; const height = 180; const pad = 28;
    const samples = history.samples;
    const root = svg("svg", { width, height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "last hour" });
    root.appendChild(svg("line", { x1: pad, y1: height - pad, x2: width - 8, y2: height - pad, stroke: "#98a2b3" }));
    root.appendChild(svg("line", { x1: pad, y1: 8, x2: pad, y2: height - pad, stroke: "#98a2b3" }));
    const label = (x, y, text, anchor) => {
      const node = svg("text", { x, y, "font-size": 11, fill: "#667085", "text-anchor": anchor || "start" });
      node.textContent = text;
      root.appendChild(node);
    };
    // The hour, or less while the service has not run that long: the lines fill the width.
    const end = samples.length ? Date.parse(samples[samples.length - 1].at) : Date.now();
    const start = Math.max(end - history.span_seconds * 1000, samples.length ? Date.parse(samples[0].at) : end);
    const spanMs = Math.max(end - start, 1000);
    label(pad, height - 10, samples.length ? time(new Date(start).toISOString()) : "");
    label(width - 8, height - 10, time(samples.length ? samples[samples.length - 1].at : null), "end");
    if (samples.length < 2) {
      label(width / 2, height / 2, samples.length ? "one sample so far" : "no samples yet (the sampler runs with workers, every " + history.interval_seconds + " s)", "middle");
    }
    const series = [
      ["depth", "inbox_depth", "inbox depth"], ["rate", "reports_resolved_per_second", "resolved/s"], ["lag", "resolution_lag_seconds", "lag s"]];
    const legend = el("div", { class: "legend" });
    for (const [name, field, title] of series) {
      const values = samples.map((s) => s[field]).filter((v) => typeof v === "number");
      const max = Math.max(1, ...values);
      const points = samples.filter((s) => typeof s[field] === "number").map((s) => {
        const x = pad + (width - 8 - pad) * Math.max(0, Date.parse(s.at) - start) / spanMs;
        const y = height - pad - (height - pad - 8) * s[field] / max;
        return x.toFixed(1) + "," + y.toFixed(1);
      });
      if (points.length > 1) root.appendChild(svg("polyline", { points: points.join(" "), fill: "none", "stroke-width": 2, class: "series-" + name }));
      legend.appendChild(el("span", {}, el("span", { class: "swatch " + name }), title + " (max " + (Math.round(max * 10) / 10) + ")"));
    }
    return el("div", { id: "health-chart-figure" }, root, legend);
  }

  // ---- Endpoints page ----------------------------------------------------------------------

  async function loadEndpoints(record) {
    try {
      const [endpoints, dead] = await Promise.all([
        api("GET", "/v1/webhook-endpoints"), api("GET", "/v1/admin/deliveries?status=dead&limit=200")]);
      $("endpoints-table").replaceChildren(table(
        ["URL", "Description", "Events", "Enabled", "Failing since", "Actions"],
        endpoints.data.map((e) => el("tr", { "data-endpoint": e.id },
          el("td", { class: "mono" }, e.url), el("td", {}, e.description || "—"),
          el("td", {}, e.event_types ? e.event_types.join(", ") : "all"),
          el("td", {}, e.enabled ? "yes" : "no" + (e.disabled_reason ? " (" + e.disabled_reason + ")" : ""),
            e.secret_readable === false
              ? el("div", { class: "error secret-unreadable" }, "secret unreadable: deliveries held (restore its key and reseal, or rotate)")
              : ""),
          el("td", {}, e.failing_since ? time(e.failing_since) : "—"),
          el("td", {},
            el("button", { type: "button", class: e.enabled ? "disable-endpoint danger" : "enable-endpoint", onclick: () => setEnabled(e, !e.enabled) },
              e.enabled ? "Disable" : "Enable"), " ",
            el("button", { type: "button", class: "rotate-secret", onclick: () => rotate(e) }, "Rotate secret")))),
        { id: "endpoints-list" }));
      $("action-record-endpoints").replaceChildren(record ? actionRecord(record.title, record.body, "endpoints-record") : "");
      $("retry-dead").disabled = dead.data.length === 0;
      $("dead-deliveries").replaceChildren(dead.data.length === 0
        ? el("p", { class: "muted", id: "no-dead" }, "No dead deliveries.")
        : table(["Delivery", "Account", "Event", "Attempts", "Last answer", "Created", ""],
          dead.data.map((d) => el("tr", { "data-delivery": d.delivery_id },
            el("td", { class: "num" }, String(d.delivery_id)),
            el("td", {}, el("a", { href: "#/account/" + encodeURIComponent(d.account_id) }, d.account_id)),
            el("td", {}, "#" + d.event_sequence + " " + d.event_type), el("td", { class: "num" }, String(d.attempts)),
            el("td", {}, d.last_status_code ? "HTTP " + d.last_status_code : (d.last_error || "—")), el("td", {}, time(d.created_at)),
            el("td", {}, el("button", { type: "button", class: "retry-delivery", "data-delivery": d.delivery_id, onclick: () =>
              deliveryAction("retry", d, (result) => loadEndpoints({ title: "Delivery retried", body: result })) }, "Retry")))),
          { id: "dead-deliveries-table" }));
      // How many times the page was drawn: lets a test know a refresh has landed.
      $("endpoints-view").dataset.loads = String(Number($("endpoints-view").dataset.loads || 0) + 1);
    } catch (error) { failed(error); }
  }

  async function setEnabled(endpoint, enabled) {
    const ok = await confirmAction((enabled ? "Enable" : "Disable") + " " + endpoint.url + "?",
      enabled ? "Deliveries to it resume." : "No new deliveries are made for it while it is disabled.", false);
    if (ok === null) return;
    try {
      const updated = await api("PATCH", "/v1/webhook-endpoints/" + endpoint.id, { enabled, actor: actor() });
      loadEndpoints({ title: "Endpoint " + (enabled ? "enabled" : "disabled") + " by " + actor(), body: { id: updated.id, url: updated.url, enabled: updated.enabled } });
    } catch (error) { failed(error); }
  }

  async function rotate(endpoint) {
    const ok = await confirmAction("Rotate the secret of " + endpoint.url + "?",
      "A new signing secret is made and shown once, here; the old one keeps signing beside it for 24 hours.", false);
    if (ok === null) return;
    try {
      const rotated = await api("POST", "/v1/webhook-endpoints/" + endpoint.id + "/rotate-secret", { actor: actor() });
      const box = $("secret-once");
      box.replaceChildren(
        el("strong", {}, "New secret for " + rotated.url + " — copy it now, it is not shown again: "),
        el("code", { id: "rotated-secret" }, rotated.secret), " ",
        el("button", { type: "button", onclick: () => { box.replaceChildren(); box.hidden = true; } }, "Done"));
      box.hidden = false;
      loadEndpoints();
    } catch (error) { failed(error); }
  }

  async function retryAllDead() {
    const ok = await confirmAction("Retry every dead delivery?", "Each becomes due now with a fresh set of attempts.", false);
    if (ok === null) return;
    try {
      const result = await api("POST", "/v1/admin/deliveries/retry-dead", { actor: actor() });
      loadEndpoints({ title: "Retried " + result.retried + " dead deliveries", body: result });
    } catch (error) { failed(error); }
  }

  // ---- Start -------------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", () => {
    $("login-form").addEventListener("submit", signIn);
    $("sign-out").addEventListener("click", signOut);
    $("account-search-form").addEventListener("submit", search);
    $("health-refresh").addEventListener("click", loadHealth);
    $("endpoints-refresh").addEventListener("click", () => loadEndpoints());
    $("retry-dead").addEventListener("click", retryAllDead);
    window.addEventListener("hashchange", route);
    route();
  });
})();
