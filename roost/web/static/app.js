// roost web: the live parts of a page. The server renders every part (escaped there);
// this only swaps them in when the page's event stream says they changed.
"use strict";
(function () {
  const root = document.querySelector("[data-live]");
  if (!root || !window.EventSource) return;
  const source = new EventSource(root.dataset.live);
  const put = (id, html, append) => {
    const el = document.getElementById(id);
    if (!el) return;
    // Keep the <details> a reader opened across a redraw of the same list.
    const open = new Set([...el.querySelectorAll("details[open]")].map((d, i) => i));
    if (append) el.insertAdjacentHTML("beforeend", html);
    else el.innerHTML = html;
    if (!append) el.querySelectorAll("details").forEach((d, i) => { if (open.has(i)) d.open = true; });
  };
  const handle = (append) => (event) => {
    const parts = JSON.parse(event.data);
    for (const id of Object.keys(parts)) put(id, parts[id], append);
    document.body.dataset.updated = String(Date.now());
    document.dispatchEvent(new CustomEvent("roost:update", {detail: Object.keys(parts)}));
  };
  source.addEventListener("parts", handle(false));
  source.addEventListener("append", handle(true));
  source.addEventListener("reset", handle(false));
})();
