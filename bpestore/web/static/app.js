// The bpestore explorer's only script: small conveniences, nothing the pages need to work.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Hovering a token lights up every token with the same id on the page.
  document.body.addEventListener("mouseover", (event) => {
    const token = event.target.closest(".tok[data-id]");
    document.querySelectorAll(".tok.lit").forEach((el) => el.classList.remove("lit"));
    if (token) {
      document.querySelectorAll(`.tok[data-id="${CSS.escape(token.dataset.id)}"]`).forEach((el) => el.classList.add("lit"));
    }
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

  // Ctrl+Enter in the playground's text area tokenizes.
  const text = document.getElementById("text");
  if (text && text.form) {
    text.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        text.form.requestSubmit();
      }
    });
  }
});
