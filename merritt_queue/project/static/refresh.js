/*
 * Auto-refresh for list pages: every N seconds fetch the current URL again and
 * replace the content of each [data-refresh] element with the fresh one.
 *
 * - A checkbox "auto-refresh" turns it on and off; the choice is remembered in
 *   localStorage (key "mq.autorefresh"). It goes into [data-refresh-toggle] if
 *   the page has one, else just before the first [data-refresh] element.
 * - N is window.MQ_REFRESH_SECONDS, else data-refresh-seconds on <body> or on the
 *   first [data-refresh]; 10 by default.
 * - No refresh while the tab is hidden, while the person is choosing or confirming:
 *   a checked input[type=checkbox][data-select], an element with
 *   [data-confirm-open] or an open <dialog>, or while text on the page is selected.
 * - Regions are matched by id when they have one, else by position.
 *   After a swap each region gets a "mq:refreshed" event.
 */
(function () {
  "use strict";

  var KEY = "mq.autorefresh";
  var regions = document.querySelectorAll("[data-refresh]");
  if (!regions.length) return;

  var seconds = Number(
    window.MQ_REFRESH_SECONDS ||
      document.body.dataset.refreshSeconds ||
      regions[0].dataset.refreshSeconds ||
      10
  );
  var period = Math.max(1, seconds) * 1000;
  var timer = null;
  var busy = false;

  function remembered() {
    try {
      return localStorage.getItem(KEY) !== "off";
    } catch (e) {
      return true; // storage blocked: default on, not remembered
    }
  }

  function remember(on) {
    try {
      localStorage.setItem(KEY, on ? "on" : "off");
    } catch (e) {
      /* storage blocked: the choice lasts for this page only */
    }
  }

  // The toggle: <label class="refresh-toggle"><input type=checkbox> auto-refresh <span></span></label>
  var label = document.createElement("label");
  label.className = "refresh-toggle";
  var box = document.createElement("input");
  box.type = "checkbox";
  box.checked = remembered();
  var status = document.createElement("span");
  status.className = "refresh-status";
  status.setAttribute("aria-live", "polite");
  label.append(box, " auto-refresh (" + seconds + " s) ", status);
  var slot = document.querySelector("[data-refresh-toggle]");
  if (slot) slot.appendChild(label);
  else regions[0].parentNode.insertBefore(label, regions[0]);

  function paused() {
    if (document.hidden) return true;
    if (document.querySelector("input[type=checkbox][data-select]:checked")) return true;
    if (document.querySelector("[data-confirm-open], dialog[open]")) return true;
    var sel = window.getSelection && window.getSelection();
    return Boolean(sel && !sel.isCollapsed);
  }

  function show(text, isError) {
    status.textContent = text;
    status.classList.toggle("error", Boolean(isError));
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var incoming = fresh.querySelectorAll("[data-refresh]");
    document.querySelectorAll("[data-refresh]").forEach(function (el, i) {
      var src = el.id ? fresh.getElementById(el.id) : incoming[i];
      if (!src) return;
      el.innerHTML = src.innerHTML;
      el.dispatchEvent(new CustomEvent("mq:refreshed", { bubbles: true }));
    });
  }

  function refresh() {
    if (busy || paused()) return Promise.resolve();
    busy = true;
    return fetch(window.location.href, {
      credentials: "same-origin",
      headers: { "X-Requested-With": "refresh" },
    })
      .then(function (response) {
        if (response.redirected && /\/accounts\/login\//.test(response.url)) {
          throw new Error("logged out: reload the page");
        }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        // The person may have started a selection while the request was out.
        if (!box.checked || paused()) return;
        swap(html);
        show("updated " + new Date().toLocaleTimeString());
      })
      .catch(function (err) {
        show("refresh failed: " + err.message, true);
      })
      .then(function () {
        busy = false;
      });
  }

  function schedule() {
    clearTimeout(timer);
    if (box.checked) timer = setTimeout(tick, period);
  }

  function tick() {
    refresh().then(schedule);
  }

  box.addEventListener("change", function () {
    remember(box.checked);
    show(box.checked ? "" : "paused");
    schedule();
  });

  document.addEventListener("visibilitychange", function () {
    // Back on the tab: show fresh numbers at once rather than after a whole period.
    if (!document.hidden && box.checked) tick();
  });

  if (!box.checked) show("paused");
  schedule();
})();
