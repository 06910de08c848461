// SpecScope page helpers, loaded in <head>. Three small jobs the server cannot do:
// 1. a knob typed out of range is clamped by the slider on blur without a word; say so, with the range;
// 2. the figures are drawn with a light template; when the page is dark, recolour them to match;
// 3. keyboard shortcuts: s = Step, p = Play/Pause, ← / → = replay the previous / next step; while a walk
//    ("Walk me through this step") is open, ← / → go to its previous / next stage and Esc closes it;
// 4. a walk stage's folded numbers stay open from stage to stage once opened (each stage is redrawn afresh).
(() => {
  const DARK = { bg: "#111827", grid: "#374151", text: "#e5e7eb" };

  const isDark = () => document.body.classList.contains("dark") ||
    document.documentElement.classList.contains("dark") || !!document.querySelector(".gradio-container.dark, .dark .gradio-container");

  function knobMessage(el) {
    const block = el.closest(".ss-knob");
    if (!block) return;
    const min = parseFloat(el.min), max = parseFloat(el.max);
    const label = (block.querySelector("[data-testid='block-info']") || {}).textContent || "this knob";
    let msg = block.querySelector(".ss-knob-msg");
    if (!msg) {
      msg = document.createElement("div");
      msg.className = "ss-knob-msg";
      msg.setAttribute("role", "alert");
      block.appendChild(msg);
    }
    const v = el.value.trim() === "" ? NaN : Number(el.value);
    let text = "";
    if (Number.isNaN(v)) text = `${label.trim()} needs a number between ${min} and ${max}.`;
    else if (v < min) text = `${label.trim()} must be between ${min} and ${max}: ${v} is used as ${min}.`;
    else if (v > max) text = `${label.trim()} must be between ${min} and ${max}: ${v} is used as ${max}.`;
    msg.textContent = text;
    msg.style.display = text ? "block" : "none";
  }

  document.addEventListener("input", (e) => {
    const el = e.target;
    if (el instanceof HTMLInputElement && el.closest(".ss-knob")) {
      if (el.type === "number") knobMessage(el);
      else {
        const msg = el.closest(".ss-knob").querySelector(".ss-knob-msg");
        if (msg) msg.style.display = "none";  // dragged back into range
      }
    }
  }, true);

  function recolour(gd) {
    const full = gd._fullLayout;
    if (!window.Plotly || !full || !isDark() || full.paper_bgcolor === DARK.bg) return;
    const update = { paper_bgcolor: DARK.bg, plot_bgcolor: DARK.bg, "font.color": DARK.text,
                     "legend.bgcolor": "rgba(0,0,0,0)" };
    for (const key of Object.keys(full)) {
      if (/^[xy]axis\d*$/.test(key)) {
        update[`${key}.gridcolor`] = DARK.grid;
        update[`${key}.linecolor`] = DARK.grid;
        update[`${key}.zerolinecolor`] = DARK.grid;
      }
    }
    window.Plotly.relayout(gd, update);
  }

  let walkMore = false;  // the visitor opened a stage's "How, in this step's numbers": keep it open
  document.addEventListener("toggle", (e) => {
    if (e.target.classList && e.target.classList.contains("ss-walk-more")) walkMore = e.target.open;
  }, true);

  function hook(root) {
    if (walkMore) root.querySelectorAll("details.ss-walk-more:not([open])").forEach((d) => { d.open = true; });
    for (const gd of root.querySelectorAll(".js-plotly-plot")) {
      if (!gd.dataset.ssHooked && typeof gd.on === "function") {
        gd.dataset.ssHooked = "1";
        gd.on("plotly_afterplot", () => recolour(gd));  // Gradio redraws with the server's layout
      }
      recolour(gd);
    }
  }

  let queued = false;  // many DOM changes per redraw: look at the plots once per frame
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; hook(document); });
  }).observe(document.documentElement,
    { childList: true, subtree: true, attributes: true, attributeFilter: ["class"] });

  // Plotly's toolbars (zoom, pan, download) stay for the mouse but leave the Tab order: a keyboard visitor
  // would otherwise step through ten buttons per figure to reach the next knob.
  new MutationObserver(() => {
    document.querySelectorAll(".modebar-btn:not([tabindex='-1'])").forEach((b) => b.setAttribute("tabindex", "-1"));
  }).observe(document.body, { childList: true, subtree: true });

  function visible(sel) {
    return [...document.querySelectorAll(sel)].find((el) => el.offsetParent !== null);
  }

  document.addEventListener("keydown", (e) => {
    const t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey || (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)))) return;
    const view = visible("#talon-step") ? "talon" : visible("#specbound-step") ? "specbound" : null;
    if (!view) return;
    if (visible(`#${view}-walk-panel`) && ["ArrowLeft", "ArrowRight", "Escape"].includes(e.key)) {
      const which = e.key === "Escape" ? "close" : e.key === "ArrowLeft" ? "back" : "next";
      const button = visible(`#${view}-walk-${which}`);
      if (button) button.click();
    } else if (e.key === "s") visible(`#${view}-step`).click();
    else if (e.key === "p") visible(`#${view}-play`).click();
    else if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      const box = document.querySelector(`#${view}-replay input[type=number]`);
      if (!box || box.disabled) return;
      const next = Number(box.value) + (e.key === "ArrowLeft" ? -1 : 1);
      if (next < Number(box.min) || next > Number(box.max)) return;
      box.value = String(next);
      box.dispatchEvent(new Event("input", { bubbles: true }));
      box.dispatchEvent(new Event("change", { bubbles: true }));
      box.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    } else return;
    e.preventDefault();
  });
})();
