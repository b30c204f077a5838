// Confirmations and short notices. Every admin action asks first, in a modal <dialog>
// (keyboard: Tab between the buttons, Escape cancels).

import { h } from "./dom.js";

let serial = 0;

/** Ask before acting; resolves true when the user confirms. `body`: nodes or texts. */
export function confirmAction({ title, body = [], confirm = "Confirm", danger = false }) {
  const id = `confirm-title-${++serial}`;
  return new Promise((resolve) => {
    const cancelButton = h(
      "button",
      { type: "button", class: "button", "data-dismiss": "" },
      "Back",
    );
    const okButton = h(
      "button",
      { type: "button", class: ["button", danger ? "danger" : "primary"], "data-confirm": "" },
      confirm,
    );
    const dialog = h(
      "dialog",
      { class: "confirm", "aria-labelledby": id },
      h("h2", { id }, title),
      body.map((part) => (part instanceof Node ? part : h("p", {}, part))),
      h("div", { class: "buttons" }, cancelButton, okButton),
    );
    cancelButton.addEventListener("click", () => dialog.close("cancel"));
    okButton.addEventListener("click", () => dialog.close("ok"));
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "ok");
    });
    document.body.append(dialog);
    dialog.showModal();
    (danger ? cancelButton : okButton).focus();
  });
}

let toastTimer = null;

/** A notice at the bottom of the page, read out by screen readers. */
export function toast(message, kind = "info") {
  const box = document.getElementById("toast");
  box.replaceChildren(h("span", { class: ["toast-text", kind] }, message));
  box.classList.add("shown");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => box.classList.remove("shown"), kind === "error" ? 9000 : 5000);
}

/** Run an admin action after confirmation; report the outcome; refresh the view. */
export async function act(ctx, question, run, done) {
  if (!(await confirmAction(question))) return false;
  try {
    const answer = await run();
    toast(done(answer), "ok");
    await ctx.refresh();
    return true;
  } catch (error) {
    toast(`${question.confirm} failed: ${error.message}`, "error");
    return false;
  }
}
