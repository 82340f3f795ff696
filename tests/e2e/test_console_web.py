"""The web console in a real browser: ``kfast serve --console-port`` runs a
broker and the console; confluent-kafka writes records and commits a
group's offsets; headless Chromium (Debian's chromium and chromedriver,
driven by Selenium) opens the pages and the DOM must show the topic, its
partitions, the group's lag, a browsed record's value and a live chart.
``kfast console`` on its own is checked through its JSON API, against kfast
and against Tansu when installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_support import REPO, ServeProcess, free_port, stop_process, wait_until

pytest.importorskip("aiohttp")
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
GROUP_LAG = 7  # records of partition 0 the group has not consumed
JSON_VALUE = b'{"id": 7, "item": "book", "tags": ["a", "b"]}'


def wait_http(url: str, timeout: float = 30.0) -> None:
    def answers():
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return True
        except (urllib.error.URLError, OSError):
            return False

    wait_until(answers, timeout, f"{url} answering")


def get_json(url: str):
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def fill(bootstrap: str, topic: str, group: str) -> None:
    """3 partitions: partition 0 has 20 records of which the group committed
    13; partition 1 holds the keyed JSON record with a header."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        producer.produce(topic, f"plain-{i}".encode(), partition=0)
    producer.produce(topic, JSON_VALUE, key=b"order-7", headers=[("source", b"web")], partition=1)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.commit(offsets=[TopicPartition(topic, 0, 20 - GROUP_LAG)], asynchronous=False)
    consumer.close()


class ConsoleServe(ServeProcess):
    console_port = 0

    def command(self) -> list[str]:
        cmd = super().command()
        serve = cmd.index("serve")
        return cmd[: serve + 1] + ["--console-port", str(self.console_port)] + cmd[serve + 1 :]


@contextlib.contextmanager
def running_console(bootstrap: str):
    """``kfast console`` as a user starts it; yields its base URL once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kfast",
            "console",
            "--bootstrap-server",
            bootstrap,
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(REPO),
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/")
        yield base
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """``kfast serve --console-port``: (bootstrap, console URL, topic, group)."""
    http_port = free_port()
    process = ConsoleServe(
        str(tmp_path_factory.mktemp("console") / "data"),
        free_port(),
        ["num.partitions=3", "group.initial.rebalance.delay.ms=0"],
    )
    process.console_port = http_port
    process.start()
    try:
        url = f"http://127.0.0.1:{http_port}"
        wait_http(url + "/")
        topic, group = f"orders-{uuid.uuid4().hex[:6]}", f"billing-{uuid.uuid4().hex[:6]}"
        fill(process.bootstrap_servers, topic, group)
        yield process.bootstrap_servers, url, topic, group
    finally:
        process.kill()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed (make deps installs them)"
        )
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def shown(driver, css: str, timeout: float = 30.0):
    """The element once the page has rendered it (the page fetches its data
    after load, so wait for the DOM, not for a time)."""
    from selenium.common.exceptions import NoSuchElementException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def find(d):
        try:
            return d.find_element(By.CSS_SELECTOR, css)
        except NoSuchElementException:
            error = d.find_elements(By.ID, "error")
            assert not error, f"the page shows an error: {error[0].text}"
            return False

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(find)


def test_topics_page_lists_the_topic(console, browser):
    _, url, topic, _ = console
    browser.get(f"{url}/#/topics")
    row = shown(browser, f'#topics tr[data-topic="{topic}"]')
    cells = [td.text for td in row.find_elements("css selector", "td")]
    assert cells[0] == topic and cells[1] == "3" and cells[4] == "21"


def test_topic_page_shows_partitions_leaders_replicas_isr_and_configs(console, browser):
    _, url, topic, _ = console
    browser.get(f"{url}/#/topics/{topic}")
    shown(browser, '#partitions tr[data-partition="2"]')
    rows = browser.find_elements("css selector", "#partitions tbody tr")
    assert [r.get_attribute("data-partition") for r in rows] == ["0", "1", "2"]
    for row in rows:
        assert row.find_element("css selector", ".leader").text == "1"
        assert row.find_element("css selector", ".replicas").text == "1"
        assert row.find_element("css selector", ".isr").text == "1"
    assert rows[0].find_element("css selector", ".latest").text == "20"
    assert shown(browser, '#configs tr[data-config="cleanup.policy"]').text.startswith(
        "cleanup.policy delete"
    )


def test_group_page_shows_members_assignments_and_lag(console, browser):
    bootstrap, url, topic, group = console
    # A live member: it joins, takes the three partitions and commits nothing,
    # so the lag stays what fill() committed.
    assigned = threading.Event()
    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "console-member",
            "enable.auto.commit": False,
        }
    )
    member.subscribe([topic], on_assign=lambda consumer, partitions: assigned.set())
    try:
        deadline = time.monotonic() + 30
        while not assigned.is_set():  # the assignment arrives inside poll()
            assert time.monotonic() < deadline, "the member was never assigned partitions"
            member.poll(0.1)
        browser.get(f"{url}/#/groups/{group}")
        row = shown(browser, f'#offsets tr[data-topic="{topic}"][data-partition="0"]')
        assert row.find_element("css selector", ".lag").text == str(GROUP_LAG)
        assert browser.find_element("id", "group-total-lag").text == str(GROUP_LAG)
        assert browser.find_element("id", "group-state").text == "Stable"
        (member_row,) = browser.find_elements("css selector", "#members tbody tr")
        assert member_row.find_element("css selector", ".client-id").text == "console-member"
        assert member_row.find_element("css selector", ".assignment").text == ", ".join(
            f"{topic}-{p}" for p in range(3)
        )
    finally:
        member.close()


def test_message_browser_shows_key_headers_and_value(console, browser):
    _, url, topic, _ = console
    browser.get(f"{url}/#/messages?topic={topic}&partition=1&offset=0&render=json")
    row = shown(browser, '#messages tr[data-offset="0"]')
    assert row.find_element("css selector", ".key").text == "order-7"
    assert row.find_element("css selector", ".headers").text == "source: web"
    assert json.loads(row.find_element("css selector", ".value").text) == json.loads(JSON_VALUE)
    # The same record as hex: the page re-renders on the new fragment.
    browser.get(f"{url}/#/messages?topic={topic}&partition=1&offset=0&render=hex")
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    hex_value = " ".join(f"{b:02x}" for b in JSON_VALUE)
    WebDriverWait(
        browser,
        30,
        poll_frequency=0.05,  # the old table is replaced while we look
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(
        lambda d: (
            d.find_element("css selector", '#messages tr[data-offset="0"] .value').text == hex_value
        )
    )


def test_overview_shows_brokers_quorum_and_live_throughput(console, browser, tmp_path):
    bootstrap, url, topic, _ = console
    stop = threading.Event()

    def produce():
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        while not stop.is_set():
            producer.produce(topic, b"x" * 100, partition=2)
            producer.poll(0.01)
        producer.flush(10)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        browser.get(f"{url}/#/")
        assert shown(browser, '#brokers tr[data-broker="1"]').text.endswith("active controller")
        assert shown(browser, "#controller-id").text == "1"
        assert "(leader)" in shown(browser, "#quorum tbody tr").text
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        def rate_shown(d):
            legend = d.find_elements(
                "css selector", f'#throughput-legend span[data-topic="{topic}"]'
            )
            if not legend:
                return False
            rate = int(legend[0].text.rsplit(": ", 1)[1].split()[0].replace(",", ""))
            return rate > 0

        # the legend is redrawn every second, so an element can go stale under us
        WebDriverWait(
            browser, 30, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
        ).until(rate_shown)
        points = browser.execute_script(
            "return document.querySelector(arguments[0]).getAttribute('points')",
            f'#throughput-chart polyline[data-topic="{topic}"]',
        )
        assert len(points.split()) >= 1
    finally:
        stop.set()
        writer.join()
    picture = tmp_path / "overview.png"
    assert browser.save_screenshot(str(picture))
    from PIL import Image

    image = Image.open(picture).convert("RGB")
    assert image.size[0] >= 1000
    colors = image.getcolors(maxcolors=1 << 16)
    # A blank or error page has a handful of colours; this one has text, tables and a chart.
    assert colors is None or len(colors) > 50
    assert Image.open(picture).convert("L").getextrema()[0] < 80  # dark text and header drawn


def test_console_command_api_is_read_only_and_answers_errors_as_json(console):
    bootstrap, _, topic, group = console
    with running_console(bootstrap) as base:
        status, topics = get_json(base + "/api/topics")
        assert status == 200 and {"name": topic, "partitions": 3} == {
            k: v
            for t in topics
            if t["name"] == topic
            for k, v in t.items()
            if k in ("name", "partitions")
        }
        status, found = get_json(f"{base}/api/groups/{group}")
        assert status == 200 and found["total_lag"] == GROUP_LAG
        # browsing by time: from the first record at or after the timestamp
        status, page = get_json(
            f"{base}/api/messages?topic={topic}&partition=0&timestamp=0&limit=3"
        )
        assert status == 200 and [r["offset"] for r in page["records"]] == [0, 1, 2]
        assert page["records"][0]["value"]["text"] == "plain-0"
        future = int(time.time() * 1000) + 3_600_000
        status, page = get_json(f"{base}/api/messages?topic={topic}&partition=0&timestamp={future}")
        assert status == 200 and page["records"] == [] and page["latest_offset"] == 20
        assert get_json(base + "/api/topics/no-such-topic")[0] == 404
        status, body = get_json(base + f"/api/messages?topic={topic}&partition=x")
        assert status == 400 and "partition" in body["error"]
        assert get_json(base + f"/api/messages?topic={topic}&partition=9")[0] == 404
        assert get_json(base + f"/api/messages?topic={topic}&partition=0&limit=100000")[0] == 400
        request = urllib.request.Request(base + "/api/topics", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 405


@pytest.mark.slow
def test_overview_names_the_active_kraft_controller_on_a_cluster(browser, tmp_path):
    """On a cluster with a dedicated controller, DescribeCluster answers a
    broker as "controller" (KIP-919); the console shows DescribeQuorum's
    leader as the active controller and marks no broker as it."""
    from kfast.testing.cluster import KfastCluster

    with KfastCluster(controllers=1, brokers=2, base_dir=str(tmp_path / "cluster")) as cluster:
        cluster.wait_for_brokers({2, 3})
        leader = cluster.wait_for_leader()
        with running_console(cluster.bootstrap_servers) as base:
            status, overview = get_json(base + "/api/cluster")
            assert status == 200
            assert overview["active_controller_id"] == leader == overview["quorum"]["leader_id"]
            assert sorted(b["node_id"] for b in overview["brokers"]) == [2, 3]
            browser.get(f"{base}/#/")
            assert shown(browser, "#controller-id").text == str(leader)
            rows = browser.find_elements("css selector", "#brokers tbody tr")
            assert [row.text.rsplit(" ", 1)[-1] for row in rows] == ["broker", "broker"]


def test_console_against_tansu(tansu_broker):
    """Another Kafka-compatible broker: the console's queries are the Kafka protocol only."""
    topic = f"tansu-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": tansu_broker})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": tansu_broker})
    producer.produce(topic, b"hello tansu", key=b"k")
    assert producer.flush(30) == 0
    with running_console(tansu_broker) as base:
        status, cluster = get_json(base + "/api/cluster")
        assert status == 200 and cluster["brokers"]
        status, topics = get_json(base + "/api/topics")
        assert status == 200 and topic in [t["name"] for t in topics]
        status, page = get_json(f"{base}/api/messages?topic={topic}&partition=0&offset=0")
        assert status == 200 and page["records"][0]["value"]["text"] == "hello tansu"
