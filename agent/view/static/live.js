// Live update: poll the run's version; when it changes, fetch this page again and patch the main
// content in place: only the nodes that changed are touched, so what a reader types in a form (the
// search box), a text selection, open details and the scroll position all survive the update.
// "Follow the latest chapter" (the Book page) scrolls to the newest chapter after each update.
(function () {
  const url = document.body.dataset.versionUrl;
  const every = parseInt(document.body.dataset.pollMs || "1500", 10);
  const badge = document.getElementById("live");
  if (!url || !every || !badge) return;
  const follow = document.getElementById("follow-latest");
  const KEY = "fabula-follow-latest";
  if (follow) {
    follow.checked = window.localStorage?.getItem(KEY) === "1";
    follow.addEventListener("change", () => {
      window.localStorage?.setItem(KEY, follow.checked ? "1" : "0");
      if (follow.checked) toLatest();
    });
  }
  function toLatest() {
    const units = document.querySelectorAll("#content [data-unit]");
    if (units.length) units[units.length - 1].scrollIntoView({ block: "start" });
  }
  const FIELDS = "input, textarea, select";
  function same(a, b) {
    return a.nodeType === b.nodeType && a.nodeName === b.nodeName && (a.id || "") === (b.id || "");
  }
  // Make `here` look like `fresh`, touching only what differs; form fields keep what was typed.
  function patch(here, fresh) {
    if (here.nodeType === 1) {
      for (const { name, value } of [...fresh.attributes]) {
        if (here.getAttribute(name) !== value && name !== "value") here.setAttribute(name, value);
      }
      for (const { name } of [...here.attributes]) {
        if (!fresh.hasAttribute(name) && name !== "open" && name !== "value") here.removeAttribute(name);
      }
      if (here.matches(FIELDS)) return;
    }
    const old = [...here.childNodes];
    const next = [...fresh.childNodes];
    next.forEach((node, i) => {
      const mine = old[i];
      if (!mine) here.appendChild(document.importNode(node, true));
      else if (!same(mine, node)) here.replaceChild(document.importNode(node, true), mine);
      else if (mine.nodeType === 1) patch(mine, node);
      else if (mine.nodeValue !== node.nodeValue) mine.nodeValue = node.nodeValue;
    });
    for (let i = old.length - 1; i >= next.length; i--) here.removeChild(old[i]);
  }
  async function refresh() {
    const page = await fetch(window.location.href, { cache: "no-store" });
    if (!page.ok) return;
    const doc = new DOMParser().parseFromString(await page.text(), "text/html");
    const fresh = doc.getElementById("content");
    const here = document.getElementById("content");
    if (!fresh || !here) return;
    const y = window.scrollY;
    patch(here, fresh);
    if (follow && follow.checked) toLatest();
    else window.scrollTo(0, y);
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
  let last = null;
  if (follow && follow.checked) toLatest();
  poll();
})();
