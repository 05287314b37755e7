// Live update: poll the run's version; when it changes, fetch this page again and swap
// the main content in place (scroll position kept). No framework, no network beyond this server.
(function () {
  const url = document.body.dataset.versionUrl;
  const every = parseInt(document.body.dataset.pollMs || "1500", 10);
  const badge = document.getElementById("live");
  if (!url || !every || !badge) return;
  let last = null;
  async function refresh() {
    const page = await fetch(window.location.href, { cache: "no-store" });
    if (!page.ok) return;
    const doc = new DOMParser().parseFromString(await page.text(), "text/html");
    const fresh = doc.getElementById("content");
    const here = document.getElementById("content");
    if (!fresh || !here) return;
    const y = window.scrollY;
    const open = [...here.querySelectorAll("details[open]")].map((d) => d.closest("[id]")?.id);
    here.innerHTML = fresh.innerHTML;
    open.forEach((id) => { const d = id && document.getElementById(id)?.querySelector("details"); if (d) d.open = true; });
    window.scrollTo(0, y);
    badge.classList.add("updated");
    setTimeout(() => badge.classList.remove("updated"), 800);
  }
  async function poll() {
    try {
      const reply = await fetch(url, { cache: "no-store" });
      if (reply.ok) {
        const { version, word } = await reply.json();
        badge.classList.add("on");
        if (word && badge.textContent !== word) {  // the run's status in words: writing, completed, ...
          badge.textContent = word;
          badge.className = "live badge on badge-" + word;
        }
        if (last !== null && version !== last) await refresh();
        last = version;
      } else {
        badge.classList.remove("on");
      }
    } catch (e) {
      badge.classList.remove("on");
    }
    setTimeout(poll, every);
  }
  poll();
})();
