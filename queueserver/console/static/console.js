// Progressive enhancement: the pages work without it. Sections marked data-refresh="N" (each with an id)
// are re-fetched every N seconds and swapped in place (paused while a form in the page has focus);
// forms with data-confirm ask first.
"use strict";
(function () {
  // One fetch per tick for all the page's sections (at the shortest interval asked): a page costs the
  // server one render per tick, however many sections refresh.
  const ids = Array.from(document.querySelectorAll("[data-refresh]"), function (s) { return s.id; });
  const seconds = Math.min.apply(null, Array.from(document.querySelectorAll("[data-refresh]"),
    function (s) { return Number(s.dataset.refresh) || 5; }));
  async function tick() {
    const busy = document.activeElement && document.activeElement.closest("form");
    if (!busy && document.visibilityState !== "hidden") {
      try {
        const response = await fetch(location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}});
        if (response.ok) {
          const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
          ids.forEach(function (id) {
            const now = document.getElementById(id), next = fresh.getElementById(id);
            if (now && next) now.replaceWith(next);
          });
        }
      } catch (e) { /* the server may be restarting; try again next time */ }
    }
    setTimeout(tick, seconds * 1000);
  }
  if (ids.length) setTimeout(tick, seconds * 1000);
  document.addEventListener("submit", function (event) {
    const message = event.target.dataset && event.target.dataset.confirm;
    if (message && !window.confirm(message)) event.preventDefault();
  });
})();
