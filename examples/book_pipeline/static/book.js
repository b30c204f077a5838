// The book's admin page: polls the latest job while one is pending or running, shows its
// progress, and offers resume after a failure. Text from the server is only ever set as
// text (textContent), never parsed as HTML.
"use strict";

(function () {
  const body = document.body;
  const bookId = body.dataset.bookId;
  const pollMs = Math.max(100, Number(body.dataset.pollMs) || 3000);
  const base = "/admin/books/" + encodeURIComponent(bookId);
  const $ = (id) => document.getElementById(id);
  let timer = null;
  let resumeOcr = false; // the failed job shown is an OCR batch: resuming OCRs its pages left

  function show(id, visible) {
    $(id).hidden = !visible;
  }

  async function call(method, path, payload) {
    const options = { method: method, headers: {} };
    if (payload instanceof FormData) {
      options.body = payload;
    } else if (payload !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(payload);
    }
    const answer = await fetch(base + path, options);
    const data = await answer.json().catch(() => null);
    if (!answer.ok) {
      const message = (data && data.detail) || "HTTP " + answer.status;
      throw new Error(message);
    }
    return data;
  }

  function detailOf(job) {
    if (!job.progress_detail) return {};
    try {
      return JSON.parse(job.progress_detail) || {};
    } catch (e) {
      return {}; // a malformed detail must not break the page
    }
  }

  function failedPages(job) {
    const errors = detailOf(job).page_errors || {};
    return Object.keys(errors)
      .map(Number)
      .sort((a, b) => a - b)
      .map((page) => ({ page: page, info: errors[page] }));
  }

  function render(job) {
    show("job-none", job === null);
    show("job-progress", job !== null && (job.status === "pending" || job.status === "running"));
    show("job-done", job !== null && job.status === "completed");
    show("job-failed", job !== null && job.status === "failed");
    if (job === null) return;
    const total = job.total_items || 0;
    const done = job.completed_items + job.failed_items;
    const pct = total ? Math.round((100 * done) / total) : 0;
    const failed = failedPages(job);
    const warning =
      job.failed_items > 0
        ? job.failed_items + " page(s) had errors: " +
          failed.map((f) => "page " + f.page + " (" + f.info.error_type + ")").join(", ")
        : "";
    if (job.status === "pending" || job.status === "running") {
      $("bar").max = Math.max(total, 1);
      $("bar").value = done;
      $("job-counts").textContent =
        job.status === "pending"
          ? job.job_type + ": waiting to start"
          : job.job_type + ": " + job.completed_items + "/" + total + " pages (" + pct + "%)";
      $("job-current").textContent =
        job.status === "running" && job.current_item !== null
          ? "Currently processing: Page " + job.current_item
          : "";
      const stats = detailOf(job).stats;
      $("job-stats").textContent = stats
        ? "Subtopics: " + stats.subtopics_created + " created, " + stats.subtopics_merged + " merged"
        : "";
      $("job-warning").textContent = warning;
      show("job-warning", warning !== "");
    } else if (job.status === "completed") {
      $("done-summary").textContent =
        job.job_type + " completed: " + job.completed_items + "/" + total + " pages";
      $("done-warning").textContent = warning;
      show("done-warning", warning !== "");
    } else {
      const last = job.last_completed_item;
      const stopped = job.current_item !== null ? job.current_item : (last || 0) + 1;
      $("failed-summary").textContent =
        job.job_type + " stopped at page " + stopped + "/" + (total || "?");
      $("failed-error").textContent = job.error_message;
      const list = $("failed-pages");
      list.replaceChildren();
      for (const f of failed) {
        const item = document.createElement("li");
        item.textContent = "Page " + f.page + ": " + f.info.error + " (" + f.info.error_type + ")";
        list.appendChild(item);
      }
      const extraction = job.job_type === "extraction";
      const ocr = job.job_type === "ocr_batch";
      resumeOcr = ocr;
      $("resume").textContent = last !== null ? "Resume from Page " + (last + 1) : "Resume";
      show("resume", (extraction && last !== null) || ocr);
      show("restart", extraction);
    }
  }

  function renderPages(pages) {
    const list = $("page-list");
    list.replaceChildren();
    for (const page of pages) {
      const item = document.createElement("li");
      item.value = page.page_num;
      item.className = "ocr-" + page.ocr_status;
      item.textContent = page.filename + " — OCR " + page.ocr_status;
      if (page.ocr_status === "failed") {
        item.textContent += ": " + page.ocr_error + " ";
        const retry = document.createElement("button");
        retry.type = "button";
        retry.textContent = "Retry";
        retry.addEventListener("click", () => act(() => call("POST", "/pages/" + page.page_num + "/retry-ocr")));
        item.appendChild(retry);
      }
      list.appendChild(item);
    }
  }

  async function refresh() {
    const [job, pages] = await Promise.all([call("GET", "/jobs/latest"), call("GET", "/pages")]);
    render(job);
    renderPages(pages.pages);
    const active = job !== null && (job.status === "pending" || job.status === "running");
    if (!active && timer !== null) {
      clearInterval(timer); // a terminal job is never polled again
      timer = null;
    }
    return active;
  }

  let polling = false; // a poll's answers not yet in

  function poll() {
    // A slow server: this tick is skipped rather than another poll piled on the one
    // still waiting (which could also land after the job was shown finished).
    if (polling) return;
    polling = true;
    refresh()
      .catch((e) => ($("job-message").textContent = e.message))
      .finally(() => (polling = false));
  }

  function startPolling() {
    if (timer === null) {
      timer = setInterval(poll, pollMs);
    }
  }

  async function act(action) {
    $("job-message").textContent = "";
    try {
      const answer = await action();
      if (answer && answer.message) $("job-message").textContent = answer.message;
      if (await refresh()) startPolling();
    } catch (e) {
      $("job-message").textContent = e.message;
    }
  }

  $("generate").addEventListener("click", () => act(() => call("POST", "/generate-guidelines", {})));
  $("resume").addEventListener("click", () =>
    act(() =>
      resumeOcr ? call("POST", "/pages/resume-ocr") : call("POST", "/generate-guidelines", { resume: true }),
    ),
  );
  $("restart").addEventListener("click", () => act(() => call("POST", "/generate-guidelines", { start_page: 1 })));
  $("finalize").addEventListener("click", () => act(() => call("POST", "/finalize")));
  $("upload").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = new FormData();
    for (const file of $("files").files) form.append("images", file);
    act(() => call("POST", "/pages/bulk", form));
  });

  // On load: look once; poll only while a job is pending or running.
  refresh()
    .then((active) => {
      if (active) startPolling();
    })
    .catch((e) => ($("job-message").textContent = e.message));
})();
