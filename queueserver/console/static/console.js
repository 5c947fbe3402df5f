// Progressive enhancement: the pages work without it. Sections marked data-refresh="N" are
// re-fetched every N seconds and swapped in place (paused while a form in the page has focus);
// forms with data-confirm ask first.
"use strict";
(function () {
  function refresh(section, seconds) {
    setTimeout(async function tick() {
      const busy = document.activeElement && document.activeElement.closest("form");
      if (!busy && document.visibilityState !== "hidden") {
        try {
          const response = await fetch(location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}});
          if (response.ok) {
            const fresh = new DOMParser().parseFromString(await response.text(), "text/html").getElementById(section.id);
            if (fresh) { section.replaceWith(fresh); section = fresh; }
          }
        } catch (e) { /* the server may be restarting; try again next time */ }
      }
      setTimeout(tick, seconds * 1000);
    }, seconds * 1000);
  }
  document.querySelectorAll("[data-refresh]").forEach(function (section) {
    refresh(section, Number(section.dataset.refresh) || 5);
  });
  document.addEventListener("submit", function (event) {
    const message = event.target.dataset && event.target.dataset.confirm;
    if (message && !window.confirm(message)) event.preventDefault();
  });
})();
