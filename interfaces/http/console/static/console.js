// Progressive enhancement only: every page works without this file.
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button.copy[data-copy]")) {
    button.hidden = false;
    button.addEventListener("click", async () => {
      const field = document.getElementById(button.dataset.copy);
      field.select();
      try { await navigator.clipboard.writeText(field.value); } catch (e) { document.execCommand("copy"); }
      button.textContent = "Copied";
    });
  }
});
