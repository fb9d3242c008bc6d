"""Checks of the HTML report in a real browser (headless Chromium), against
the JSON report of the same trace (tests/scenarios/html_report.sh).

    html_check.py run PAGE.html REPORT.json SHOT.png
    html_check.py ranks PAGE.html RANKS.json SHOT.png

Prints PASS/FAIL lines (tests/lib.sh's format) for the cases of one page.
"""
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from browser import Browser, BrowserError, png_colours  # noqa: E402

T = "html_report"
failed = False


def case(name, ok, why):
    global failed
    if ok:
        print("PASS %s_%s" % (T, name))
    else:
        failed = True
        print("FAIL %s_%s: %s" % (T, name, why))


def hexrgb(h):
    return bytes(int(h[i:i + 2], 16) for i in (1, 3, 5))


def near(c, want, tol=6):
    return all(abs(a - b) <= tol for a, b in zip(c, want))


def page_common(b, page):
    b.open("file://" + os.path.abspath(page))
    ready = b.wait_for("document.body.getAttribute('data-ready')")
    case("loads", ready == "1" and not b.errors,
         "ready=%r, errors: %s" % (ready, "; ".join(b.errors[:3])))
    # one file, nothing fetched: the page asked for itself only
    others = [u for u in b.requests if u != "file://" + os.path.abspath(page)]
    case("offline", not others, "the page asked for %s" % others[:3])


def check_run(page, report, shot):
    R = json.load(open(report))
    steps = R["steps"]
    tail = [s for s in steps if s["tail"] and not s["incomplete"]]
    with Browser() as b:
        page_common(b, page)
        n = b.eval("document.getElementById('timeline').getAttribute('data-steps')")
        case("steps", n == str(len(steps)), "timeline has %s steps, the JSON report %d" % (n, len(steps)))
        nep = b.eval("document.querySelectorAll('#episodes tbody tr').length")
        head = b.eval("document.getElementById('headline').textContent")
        case("headline", str(R["summary"]["steps"]) in head.replace(",", ""),
             "headline %r lacks the step count %s" % (head[:200], R["summary"]["steps"]))
        # the causes over all steps: the JSON report's causes with time, same order
        bc = R["summary"]["by_cause"]
        vocab = list(bc)
        want = sorted([c for c in bc if bc[c] > 0], key=lambda c: (-bc[c], vocab.index(c)))
        got = b.eval("Array.from(document.querySelectorAll('#causes-all tr')).map(function(r){return r.getAttribute('data-cause')})")
        case("causes", got == want, "page %s, JSON report %s" % (got, want))
        # the distribution: bars holding every complete step, and its three markers
        hist = b.eval("(function(){var s=document.querySelector('#histogram svg'); if(!s) return null; var n=0; s.querySelectorAll('rect title').forEach(function(t){n+=parseInt(t.textContent.replace(/,/g,''))}); return [n, s.querySelectorAll('line.marker').length]})()")
        complete = sum(1 for x in steps if not x["incomplete"] and x["duration_ns"] >= 500)
        case("histogram", hist is not None and hist[0] == complete and hist[1] == 3,
             "histogram (steps in its bars, markers) %s; %d complete steps" % (hist, complete))
        # every tail step is in one episode row
        spans = b.eval("stepblame.data.episodes.map(function(p){return [p.first,p.last]})")
        covered = set()
        for a, z in spans:
            covered.update(range(a, z + 1))
        tail_idx = {s["index"] - steps[0]["index"] for s in steps if s["tail"]}
        case("episodes", nep == min(50, len(spans)) and covered == tail_idx and (nep > 0) == bool(tail_idx),
             "%d rows, %d episodes; tail steps %s, covered %s" % (nep, len(spans), sorted(tail_idx)[:10], sorted(covered)[:10]))
        if not tail:
            case("click", False, "no tail step in the trace to click")
            return
        # click the longest tail step on the canvas: its blame shows
        s = max(tail, key=lambda x: x["duration_ns"])
        i = s["index"] - steps[0]["index"]
        b.eval("stepblame.focus(%d, %d, -1)" % (i, i))
        r = b.eval("(function(){var r=document.getElementById('timeline').getBoundingClientRect();return [r.left,r.top,r.width,r.height]})()")
        x = r[0] + b.eval("stepblame.xOf(%d)" % i)
        y = r[1] + r[3] - 40
        b.move(x, y)
        tip = b.eval("document.getElementById('tip').style.display === 'block' ? document.getElementById('tip').textContent : ''")
        case("hover", tip.startswith("step %d:" % s["step"]), "hovering step %d shows %r" % (s["step"], tip[:120]))
        b.click(x, y)
        got = b.eval("document.getElementById('step-detail').getAttribute('data-step')")
        text = b.eval("document.getElementById('step-detail').textContent")
        top = s["blame"][0] if s["blame"] else None
        ok = got == str(s["step"]) and (top is None or top["cause"] in text)
        if ok and top and top.get("culprit", {}).get("comm"):
            ok = top["culprit"]["comm"] in text
        case("click", ok, "clicked step %d: detail of step %s, text %r; its top blame %s" %
             (s["step"], got, text[:300], top))
        # wheel zoom, then the button back to all steps
        b.call("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": r[0] + r[2] / 2, "y": r[1] + 100, "deltaX": 0, "deltaY": -300})
        v1 = b.eval("document.getElementById('timeline').getAttribute('data-view')")
        b.eval("document.getElementById('zoom-reset').click()")
        v2 = b.eval("document.getElementById('timeline').getAttribute('data-view')")
        case("zoom", v2 == "0:%d" % len(steps) and v1 != v2 and len(steps) > 10,
             "after the wheel %s, after reset %s" % (v1, v2))
        # an episode row shows its steps on the timeline, its longest selected
        ep = b.eval("stepblame.data.episodes[0]")
        b.eval("document.querySelector('#episodes tbody tr').scrollIntoView()")
        er = b.eval("(function(){var r=document.querySelector('#episodes tbody tr').getBoundingClientRect();return [r.left,r.top,r.width,r.height]})()")
        b.click(er[0] + 20, er[1] + er[3] / 2)
        view = b.eval("document.getElementById('timeline').getAttribute('data-view')")
        a, z = (int(v) for v in view.split(":"))
        sel = b.eval("document.getElementById('step-detail').getAttribute('data-step')")
        want = str(steps[ep["longest"]]["step"])
        case("episode_link", a <= ep["first"] and ep["last"] < z and z - a < len(steps) and sel == want,
             "episode of steps %d-%d: view %s, selected step %s (want %s)" % (ep["first"], ep["last"], view, sel, want))
        b.eval("window.scrollTo(0, 0)")
        png = b.screenshot()
        open(shot, "wb").write(png)
        cols = png_colours(png, 2)
        causes = [c["cause"] for c in s["blame"]]
        palette = b.eval("(function(){var m={};document.querySelectorAll('#legend .sw').forEach(function(e){m[e.nextSibling.textContent]=getComputedStyle(e).backgroundColor});return m})()")
        want_rgb = []
        for c in causes[:1]:
            rgb = palette.get(c, "")
            if rgb.startswith("rgb("):
                want_rgb.append(bytes(int(v) for v in rgb[4:-1].split(",")))
        seen = [w for w in want_rgb if any(near(c, w) for c in cols)]
        case("screenshot", len(cols) > 20 and len(seen) == len(want_rgb) and want_rgb,
             "%d colours in the screenshot; the colour of %s %s" % (len(cols), causes[:1], "found" if seen else "missing"))
        case("console", not b.errors, "; ".join(b.errors[:3]))


def check_ranks(page, ranks, shot):
    R = json.load(open(ranks))
    with Browser() as b:
        page_common(b, page)
        nr = b.eval("document.getElementById('heatmap').getAttribute('data-ranks')")
        ns = b.eval("document.getElementById('heatmap').getAttribute('data-steps')")
        case("ranks_heatmap", nr == str(len(R["ranks"])) and ns == str(len(R["steps"])),
             "heatmap %s ranks x %s steps, the JSON %d x %d" % (nr, ns, len(R["ranks"]), len(R["steps"])))
        rows = b.eval("Array.from(document.querySelectorAll('#stragglers tbody tr')).map(function(r){return r.cells[0].textContent})")
        want = ["rank %d" % s["rank"] for s in R["stragglers"]]
        case("ranks_stragglers", [r.split(" (")[0] for r in rows] == want, "rows %s, JSON %s" % (rows, want))
        png = b.screenshot()
        open(shot, "wb").write(png)
        case("ranks_screenshot", len(png_colours(png, 2)) > 10, "the screenshot is blank")
        case("ranks_console", not b.errors, "; ".join(b.errors[:3]))


if __name__ == "__main__":
    try:
        (check_run if sys.argv[1] == "run" else check_ranks)(*sys.argv[2:5])
    except BrowserError as e:
        case(sys.argv[1] + "_browser", False, str(e))
    sys.exit(1 if failed else 0)
