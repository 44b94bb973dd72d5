// The bpestore explorer's only script: conveniences over pages that work without it.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Hovering a token lights up the same token (same id) in the same column only: a playground
  // column, or one side of the diff's table; the column's .hover-info line says what it is.
  const scopeOf = (token) => {
    const column = token.closest(".column");
    if (column) return [column];
    const cell = token.closest("td[data-side]");
    if (cell) return Array.from(cell.closest("table").querySelectorAll(`td[data-side="${cell.dataset.side}"]`));
    return [token.closest(".tokens") || document.body];
  };
  document.body.addEventListener("mouseover", (event) => {
    const token = event.target.closest(".tok[data-id]");
    document.querySelectorAll(".tok.lit").forEach((el) => el.classList.remove("lit"));
    if (!token) return;
    const selector = `.tok[data-id="${CSS.escape(token.dataset.id)}"]`;
    scopeOf(token).forEach((scope) => scope.querySelectorAll(selector).forEach((el) => el.classList.add("lit")));
    const info = token.closest(".column")?.querySelector(".hover-info");
    if (info) info.textContent = token.title;
  });

  // The tokenizers page filters its rows as you type (the form does the same on the server).
  const filter = document.getElementById("filter");
  const table = document.getElementById("tokenizers");
  if (filter && table) {
    filter.addEventListener("input", () => {
      const wanted = filter.value.trim().toLowerCase();
      table.querySelectorAll("tbody tr").forEach((row) => {
        row.hidden = !row.dataset.name.toLowerCase().includes(wanted);
      });
    });
  }

  const form = document.getElementById("playground-form");
  if (form) playground(form);

  const board = document.getElementById("leaderboard");
  if (board) sortable(board);
});

// The leaderboard sorts in the page when a heading is clicked: the heading links
// (?sort=COLUMN&order=asc|desc) do the same on the server without the script, and the
// address bar gets the clicked link's URL. As the server: rows without a value last, ties in
// the store's order (data-index).
function sortable(table) {
  const body = table.tBodies[0];
  const headings = Array.from(table.querySelectorAll("th[data-sort]"));
  table.tHead.addEventListener("click", (event) => {
    const link = event.target.closest("th[data-sort] a");
    if (!link) return;
    event.preventDefault();
    const heading = link.closest("th");
    const url = new URL(link.href);
    const descending = url.searchParams.get("order") === "desc";
    const key = heading.dataset.sort;
    const numeric = heading.dataset.type === "num";
    const valueOf = (row) => row.querySelector(`td[data-key="${key}"]`).dataset.value;
    const compare = (x, y) => (x < y ? -1 : x > y ? 1 : 0); // (code units, as the server's code points but for emoji)
    const rows = Array.from(body.rows);
    const present = rows.filter((row) => valueOf(row) !== "");
    const missing = rows.filter((row) => valueOf(row) === "");
    const byIndex = (a, b) => Number(a.dataset.index) - Number(b.dataset.index);
    present.sort((a, b) => {
      const x = valueOf(a);
      const y = valueOf(b);
      const order = numeric ? Number(x) - Number(y) : compare(x.toLowerCase(), y.toLowerCase());
      return (descending ? -order : order) || byIndex(a, b);
    });
    missing.sort(byIndex);
    body.append(...present, ...missing);
    headings.forEach((th) => {
      const other = th.querySelector("a");
      const next = new URL(other.href);
      next.searchParams.set("order", th === heading && !descending ? "desc" : "asc");
      other.href = next.pathname + next.search;
      if (th === heading) th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      else th.removeAttribute("aria-sort");
    });
    history.replaceState(null, "", url.pathname + url.search);
  });
}

// The playground tokenizes as you type: 250 ms after the last change it posts the form to
// /playground/tokens and puts the results it answers in the page, and the URL of the same view
// (X-Playground-Url) in the address bar. The form alone (GET /playground) does the same without
// the script.
function playground(form) {
  const results = document.getElementById("results");
  const status = document.getElementById("status");
  const toggle = document.getElementById("show-ws");
  const text = document.getElementById("text");
  let timer = null;
  let controller = null;
  let updates = 0;

  const update = () => {
    clearTimeout(timer);
    if (controller) controller.abort();
    controller = new AbortController();
    const mine = controller;
    status.textContent = "tokenizing…";
    results.dataset.pending = "1";
    fetch(form.dataset.tokens, { method: "POST", body: new URLSearchParams(new FormData(form)), signal: mine.signal })
      .then((response) => {
        if (!response.ok) throw new Error(`the server answered ${response.status} ${response.statusText}`);
        return response.text().then((html) => [html, response.headers.get("X-Playground-Url")]);
      })
      .then(([html, url]) => {
        if (mine !== controller) return; // a later change is on its way
        delete results.dataset.pending;
        results.innerHTML = html;
        if (url) history.replaceState(null, "", url);
        status.textContent = "";
        results.dataset.updates = String(++updates);
      })
      .catch((error) => {
        if (error.name === "AbortError") return;
        if (mine === controller) delete results.dataset.pending;
        status.textContent = `not updated: ${error.message}`;
      });
  };
  const later = () => {
    clearTimeout(timer);
    results.dataset.pending = "1"; // (until the results of the last change are in)
    timer = setTimeout(update, 250);
  };

  form.addEventListener("input", (event) => {
    if (event.target !== toggle) later();
  });
  form.addEventListener("change", (event) => {
    if (event.target.tagName === "SELECT") update();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    update();
  });
  // The whitespace toggle only changes how the tokens look (the stylesheet) and the URL.
  toggle.addEventListener("change", () => {
    results.classList.toggle("show-ws", toggle.checked);
    const url = new URL(location.href);
    if (toggle.checked) url.searchParams.set("ws", "1");
    else url.searchParams.delete("ws");
    history.replaceState(null, "", url);
  });
  // Ctrl+Enter tokenizes at once.
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) update();
  });
}
