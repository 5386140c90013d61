"""The /web page in a real headless Chromium (Debian's), against real servers on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from browser_support import need_env

from openenv.rubric import Rubric
from openenv.testing import wait_until
from openenv.testing.live import live_server

# playwright: run by `nox -s integration` (it installs Playwright and the envs these pages play)
pytestmark = [pytest.mark.browser, pytest.mark.playwright]

ROOT = Path(__file__).resolve().parents[3]
SCREENSHOT = ROOT / "docs" / "images" / "web-grid_world.png"
ENV_ECHO = "openenv.testing.envs:EchoEnv"
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def open_page(context: Any, url: str) -> Any:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + "/web")
    page.wait_for_selector("body[data-ready='1']", timeout=15_000)
    assert not errors, errors
    return page


def board(page: Any) -> list[str]:
    """The grid as the page draws it (one string per row), read back from the rendered cells."""
    cells = page.eval_on_selector_all(
        "#grid-board span", "els => els.map(e => [e.dataset.cell, e.className, e.textContent])")
    size = max(int(c[0].split(",")[0]) for c in cells) + 1
    rows = [["."] * (len(cells) // size) for _ in range(size)]
    for pos, cls, text in cells:
        i, j = (int(v) for v in pos.split(","))
        rows[i][j] = "#" if "c-wall" in cls else (text or ".")
    return ["".join(r) for r in rows]


def shortest_path(rows: list[str]) -> list[str]:
    start = next((i, r.index("A")) for i, r in enumerate(rows) if "A" in r)
    prev: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    todo = deque([start])
    while todo:
        cur = todo.popleft()
        if rows[cur[0]][cur[1]] == "G":
            path: list[str] = []
            while prev[cur] is not None:
                cur, move = prev[cur]  # type: ignore[misc]
                path.append(move)
            return path[::-1]
        for move, (di, dj) in MOVES.items():
            nxt = (cur[0] + di, cur[1] + dj)
            if (0 <= nxt[0] < len(rows) and 0 <= nxt[1] < len(rows[0]) and rows[nxt[0]][nxt[1]] != "#"
                    and nxt not in prev):
                prev[nxt] = (cur, move)
                todo.append(nxt)
    raise AssertionError(f"no path to the goal on {rows}")


def click_legal(page: Any, move: str) -> None:
    version = page.get_attribute("#obs-text", "data-version")
    button = page.locator(f"#legal-buttons button[data-action='\"{move}\"']")
    assert button.count() == 1, f"{move!r} is not among the legal actions shown: {page.inner_text('#legal')}"
    button.click()
    page.wait_for_function(f"document.querySelector('#obs-text').dataset.version !== '{version}'")


def test_grid_world_played_to_the_goal(browser: Any, tmp_path: Path) -> None:
    need_env("openenv_env_grid_world")
    with live_server("grid_world") as srv:
        context = browser.new_context(viewport={"width": 1100, "height": 440}, accept_downloads=True)
        page = open_page(context, srv.url)
        assert page.inner_text("#env-name") == "grid_world"
        path = shortest_path(board(page))
        for n, move in enumerate(path):
            click_legal(page, move)
            if n == 3:
                shot = tmp_path / "web-grid_world.png"
                page.screenshot(path=str(shot))
                assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                if os.environ.get("OPENENV_WEB_SCREENSHOT") == "1":  # refresh the README's image
                    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(shot, SCREENSHOT)
        assert "episode over" in page.inner_text("#status")
        assert page.locator("#legal-buttons button").count() == 0
        rows = page.locator("#history tbody tr")
        assert rows.count() == len(path)
        assert float(rows.nth(len(path) - 1).locator("td").nth(2).inner_text()) > 0  # the goal's reward
        assert page.locator("#reward-chart rect").count() == len(path)
        with page.expect_download() as dl:
            page.click("#export")
        exported = Path(dl.value.path()).read_text()
        assert '"kind": "step"' in exported and '"done": true' in exported
        context.close()


def test_echo_mcp_through_a_tool_button(browser: Any) -> None:
    need_env("openenv_env_echo_mcp")
    with live_server("echo_mcp") as srv:
        context = browser.new_context()
        page = open_page(context, srv.url)
        page.wait_for_selector("form[data-tool='echo_message']")
        assert page.locator("#tool-list form").count() == 2
        form = page.locator("form[data-tool='echo_message']")
        form.locator("input[name='message']").fill("hello from chromium")
        version = page.get_attribute("#obs-text", "data-version")
        form.locator("button.tool-call").click()
        page.wait_for_function(f"document.querySelector('#obs-text').dataset.version !== '{version}'")
        assert "hello from chromium" in page.inner_text("#obs-text")
        assert page.locator("#history tbody tr").count() >= 1
        context.close()


def test_validation_error_shown_next_to_the_field(browser: Any) -> None:
    need_env("openenv_env_connect4")
    with live_server("connect4") as srv:
        context = browser.new_context()
        page = open_page(context, srv.url)
        page.fill("#action-fields input[name='column']", "9")
        page.click("#step")
        error = page.locator(".field[data-field='column'] .field-error")
        error.wait_for(state="visible")
        assert "less than or equal to 6" in error.inner_text()
        assert "invalid" in (page.get_attribute("#action-fields input[name='column']", "class") or "")
        page.fill("#action-fields input[name='column']", "3")  # the server keeps serving the session
        page.click("#step")
        page.wait_for_function("document.querySelector(\".field[data-field='column'] .field-error\")"
                               ".textContent === ''")
        assert page.locator("#history tbody tr").count() == 1
        context.close()


def test_two_tabs_have_independent_sessions(browser: Any) -> None:
    need_env("openenv_env_grid_world")
    with live_server("grid_world") as srv:
        one, two = browser.new_context(), browser.new_context()
        a, b = open_page(one, srv.url), open_page(two, srv.url)
        assert a.get_attribute("body", "data-session") != b.get_attribute("body", "data-session")
        click_legal(a, "right")
        assert "position: [0,1]" in a.inner_text("#obs-text")
        assert "position: [0,0]" in b.inner_text("#obs-text")
        assert srv.app.state.ctx.sessions.active == 2
        # Two tabs of one browser profile (shared cookies and storage) are two visitors too.
        c = open_page(one, srv.url)
        assert c.get_attribute("body", "data-session") not in {a.get_attribute("body", "data-session"),
                                                                b.get_attribute("body", "data-session")}
        assert "position: [0,0]" in c.inner_text("#obs-text")
        click_legal(c, "right")
        assert "position: [0,1]" in c.inner_text("#obs-text")
        assert "position: [0,0]" in b.inner_text("#obs-text")
        assert srv.app.state.ctx.sessions.active == 3
        one.close()
        two.close()


class _SaysHi(Rubric):
    def evaluate(self, action: Any, observation: Any) -> float:
        return 1.0 if action.message == "hi" else 0.25


def test_server_rubric_components_shown_per_step(browser: Any) -> None:
    with live_server("openenv.testing.envs:EchoEnv", transports=["web"], rubric=_SaysHi(name="says_hi")) as srv:
        context = browser.new_context()
        page = open_page(context, srv.url)
        for message, shown in (("hi", "says_hi: 1"), ("hello", "says_hi: 0.25")):
            version = page.get_attribute("#obs-text", "data-version")
            page.fill("#action-fields input[name='message']", message)
            page.click("#step")
            page.wait_for_function(f"document.querySelector('#obs-text').dataset.version !== '{version}'")
            assert shown in page.inner_text("#reward-line")
        context.close()


def test_visitor_at_capacity_sees_the_error(browser: Any) -> None:
    need_env("openenv_env_grid_world")
    with live_server("grid_world", max_sessions=1) as srv:
        first, second = browser.new_context(), browser.new_context()
        open_page(first, srv.url)
        late = open_page(second, srv.url)
        assert "capacity" in late.inner_text("#banner").lower()
        assert late.is_visible("#banner")
        first.close()  # pagehide: the page's beacon closes its session
        wait_until(lambda: not srv.app.state.ctx.sessions.active, timeout_s=10, interval_s=0.05)
        assert srv.app.state.ctx.sessions.active == 0
        late.reload()
        late.wait_for_selector("body[data-ready='1']")
        assert not late.is_visible("#banner")
        assert late.locator("#legal-buttons button").count() > 0
        second.close()


def test_token_protects_the_page(browser: Any) -> None:
    need_env("openenv_env_grid_world")
    with live_server("grid_world", token="s3cret") as srv:
        anon = browser.new_context()
        page = anon.new_page()
        assert page.goto(srv.url + "/web").status == 401
        anon.close()
        authed = browser.new_context(extra_http_headers={"Authorization": "Bearer s3cret"})
        page = open_page(authed, srv.url)
        click_legal(page, "down")
        assert "position: [1,0]" in page.inner_text("#obs-text")
        authed.close()


def test_form_generated_from_the_schema(browser: Any) -> None:
    """Enums as selects, booleans as checkboxes, bounded numbers, nested fieldsets, arrays as JSON;
    a nested validation error lands on the nested field; image, hinted grid and reward components."""
    with live_server("form_env:FormEnv") as srv:
        context = browser.new_context()
        page = open_page(context, srv.url)
        form = page.locator("#action-fields")
        assert form.locator("select[name='colour'] option").all_inner_texts() == ["red", "green", "blue"]
        assert form.locator("input[type='checkbox'][name='fill']").count() == 1
        strength = form.locator("input[type='number'][name='strength']")
        assert (strength.get_attribute("min"), strength.get_attribute("max")) == ("0", "1")
        x = page.locator("fieldset[data-loc='target'] input[type='number'][name='target.x']")
        assert (x.get_attribute("min"), x.get_attribute("max")) == ("0", "3")
        assert form.locator("textarea[name='tags']").count() == 1
        assert form.locator("input[name='metadata']").count() == 0
        x.fill("7")
        page.fill("input[name='target.y']", "1")
        page.click("#step")
        error = page.locator(".field[data-field='target.x'] .field-error")
        error.wait_for(state="visible")
        assert "less than or equal to 3" in error.inner_text()
        assert page.inner_text(".field[data-field='target.y'] .field-error") == ""
        x.fill("2")
        form.locator("select[name='colour']").select_option(label="green")
        page.fill("textarea[name='tags']", '["a", "b"]')
        version = page.get_attribute("#obs-text", "data-version")
        page.click("#step")
        page.wait_for_function(f"document.querySelector('#obs-text').dataset.version !== '{version}'")
        assert page.inner_text("#grid-board span[data-cell='1,2']") == "G"
        assert page.get_attribute("#image", "src").startswith("data:image/png;base64,iVBOR")
        assert page.is_visible("#image")
        # The field the schema declares as an image wins over a string that merely looks like one.
        assert page.get_attribute("#image", "data-field") == "screen"
        assert page.eval_on_selector("#image", "i => i.naturalWidth") == 2
        assert "paint: 0.5" in page.inner_text("#reward-line")
        assert '"tags":["a","b"]' in page.inner_text("#obs-text")
        context.close()


def test_reset_with_a_seed_and_the_json_tree(browser: Any) -> None:
    need_env("openenv_env_maze")
    with live_server("maze") as srv:
        context = browser.new_context()
        page = open_page(context, srv.url)

        def reset(seed: int) -> str:
            version = page.get_attribute("#obs-text", "data-version")
            page.fill("#seed", str(seed))
            page.click("#reset")
            page.wait_for_function(f"document.querySelector('#obs-text').dataset.version !== '{version}'")
            return page.inner_text("#obs-text")

        first, again, other = reset(5), reset(5), reset(6)
        assert first == again and first != other  # the seed reached the env: same maze, another maze
        page.click("#obs-json-box summary")
        tree = page.inner_text("#obs-json")
        assert "observation" in tree and "legal_actions" in tree
        context.close()


def test_the_page_says_it_is_connecting_until_the_env_answers(browser: Any) -> None:
    """Right after load (the schema call still pending) the page shows "connecting…", not an empty
    board and grey buttons; once the env answers the note goes away."""
    with live_server(ENV_ECHO) as srv:
        page = browser.new_context().new_page()
        held: list[Any] = []
        page.route("**/web/api/schema", lambda route: held.append(route))  # held: the page is "connecting"
        page.goto(srv.url + "/web")
        page.wait_for_function("document.body.dataset.state === 'connecting'")
        for _ in range(100):  # the route handler runs while Playwright waits (bounded)
            if held:
                break
            page.wait_for_timeout(50)
        assert held, "the page never asked for the schema"
        assert page.get_attribute("body", "data-state") == "connecting"
        assert page.is_visible("#connecting") and "Connecting" in page.inner_text("#connecting")
        assert page.inner_text("#session-info") == "connecting…"
        page.unroute("**/web/api/schema")  # lets the held call through
        page.wait_for_selector("body[data-ready='1']", timeout=15_000)
        assert page.get_attribute("body", "data-state") == "ready"
        assert not page.is_visible("#connecting")


def test_an_ended_episode_disables_step_and_the_chart_shows_small_penalties(browser: Any) -> None:
    need_env("openenv_env_grid_world")
    with live_server("grid_world") as srv:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = open_page(context, srv.url)
        cell = page.eval_on_selector("#grid-board span", "e => e.getBoundingClientRect().width")
        assert cell > 40  # the board grows with the viewport (it was 28 px at any size)
        for move in shortest_path(board(page)):
            click_legal(page, move)
        assert page.locator("#step").is_disabled() and page.is_visible("#over-hint")
        assert not page.locator("#reset").is_disabled()
        chart = page.locator("#reward-chart")
        assert float(chart.get_attribute("data-pos") or 0) == 1.0
        assert float(chart.get_attribute("data-neg") or 0) == pytest.approx(0.01)
        heights = page.eval_on_selector_all(
            "#reward-chart rect.neg", "els => els.map(e => +e.getAttribute('height'))")
        viewbox_h = float(chart.get_attribute("viewBox").split()[3])
        assert heights and min(heights) > viewbox_h / 4  # a -0.01 penalty is a bar, not a hairline
        page.click("#reset")
        page.wait_for_function("!document.querySelector('#step').disabled")
        assert not page.is_visible("#over-hint")


def test_miniwob_played_with_the_screenshot_shown(browser: Any) -> None:
    """A MiniWoB session on the page: the task's screenshot shows as the picture, and a click command
    typed into the form (the command union is a JSON field) earns the task's reward."""
    need_env("openenv_env_miniwob")
    import json

    from openenv_env_miniwob import scripted_solver

    with live_server("miniwob") as srv:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = open_page(context, srv.url)
        version = page.get_attribute("#obs-text", "data-version")
        page.fill("#seed", "4")
        page.click("#reset")
        page.wait_for_function(f"document.querySelector('#obs-text').dataset.version !== '{version}'")
        assert page.get_attribute("#image", "src").startswith("data:image/png;base64,iVBOR")
        assert page.is_visible("#image")
        size = page.eval_on_selector("#image", "i => [i.naturalWidth, i.naturalHeight]")
        assert size == [160, 210]  # the task area, as the env's screenshot
        # Found through the schema's image declaration (openenv.types.Image), not by sniffing strings.
        assert page.get_attribute("#image", "data-field") == "image"
        assert page.evaluate("() => document.querySelector('#image').alt") == "image"
        shown = dict(line.split(": ", 1) for line in page.inner_text("#obs-text").splitlines() if ": " in line)
        assert shown["utterance"].startswith("Click on the")
        obs = {"task": shown["task"], "utterance": shown["utterance"], "elements": json.loads(shown["elements"])}
        command = scripted_solver(obs)["command"]
        assert command["kind"] == "click"
        version = page.get_attribute("#obs-text", "data-version")
        page.fill("textarea[name='command']", json.dumps(command))
        page.click("#step")
        page.wait_for_function(f"document.querySelector('#obs-text').dataset.version !== '{version}'")
        assert "reward: 1" in page.inner_text("#reward-line")
        assert "episode over" in page.inner_text("#status")
        assert page.is_visible("#image")
        context.close()
