//! The overview displays in a real headless Chromium against a real `tserver serve --http`: the
//! landing page is the plant overview generated from the demo plant (a tile per area with its
//! key values as moving analog indicators, its equipment's states and its alarms counted by
//! priority), an area's display of its equipment with sparklines and states off normal, values
//! and alarms live, a click into a tag's detail (what it is, its alarms, its documents, its
//! trend), the keyboard alone, a panel PC, a desk and a
//! phone, and axe-core on each screen. Screenshots under `target/panel-screenshots/`.

use serde_json::json;
use service_client::WriteValue;
use tserver_tests::chromium::Browser;

use crate::operator_writes::solution_with_writable_tags;
use crate::panel::{PHONE, PanelRig, assert_no_violations, assert_within_the_screen, logged_in, write};

/// The text of every element `css` matches, in document order.
async fn texts(browser: &Browser, css: &str) -> serde_json::Value {
    browser
        .run(
            "return [...document.querySelectorAll(arguments[0])].map((node) => node.textContent.trim());",
            vec![json!(css)],
        )
        .await
}

/// The row of `tag` on the overview.
fn point(tag: &str) -> String {
    format!("#overview-tiles tr[data-tag=\"{tag}\"]")
}

/// The state of `tag` on the overview.
fn state(tag: &str) -> String {
    format!("#overview-tiles li[data-tag=\"{tag}\"]")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_landing_page_is_the_plant_overview_and_each_area_opens_its_equipment() {
    let rig = PanelRig::start(solution_with_writable_tags()).await;
    let (_driver, browser) = logged_in(&rig, "guest", "").await;
    let guest = rig.guest().await;

    // The landing page: a tile per area, each with its key values in the plant file's order,
    // live, on indicators that draw their range and normal range; each equipment's state.
    browser
        .wait_text("#overview-title", "the landing page", |title| {
            title == "Plant overview"
        })
        .await;
    assert_eq!(
        texts(&browser, "#overview-tiles .tile-title").await,
        json!(["Area1", "Area2"])
    );
    browser
        .wait_text(
            &format!("{} .value", point("Pump1.FlowRate")),
            "Pump 1's flow",
            |text| text == "84",
        )
        .await;
    assert_eq!(
        texts(&browser, "#overview-tiles .tile:first-child .point-label").await,
        json!(["Pump1 Flow Rate", "Tank1 Level", "Pump1 Motor1 Temperature"])
    );
    let gauge = browser
        .run(
            "return document.querySelector(arguments[0]).getAttribute('aria-label');",
            vec![json!(format!("{} .mai", point("Tank2.Temperature")))],
        )
        .await;
    assert_eq!(gauge, json!("24.1 on a scale from 0 to 100, normal 15 to 35"));
    browser
        .wait_text(
            &format!("{} .state-word", state("Pump2.Running")),
            "Pump 2's state",
            |text| text == "Stopped",
        )
        .await;
    assert_eq!(
        texts(&browser, "#overview-tiles .tile:first-child .state-label").await,
        json!(["Pump1", "Pump2"])
    );
    assert_eq!(
        texts(&browser, "#overview-tiles .tile:first-child .alarm-chips").await,
        json!(["Alarms: No alarms"])
    );

    // Tank 1 trips its high alarm: its area counts it by priority, its value says which.
    write(&guest, "Tank1.Level", WriteValue::Number(92.0)).await;
    browser
        .wait_text(
            "#overview-tiles .tile:first-child .alarm-chips",
            "the area's alarm count",
            |text| text == "Alarms: 1 High1 unacknowledged",
        )
        .await;
    browser
        .wait_text(
            &format!("{} .value-word", point("Tank1.Level")),
            "the alarm on the value",
            |text| text == "Hi · High",
        )
        .await;
    let class = browser
        .run(
            "return document.querySelector(arguments[0]).className;",
            vec![json!(point("Tank1.Level"))],
        )
        .await;
    assert_eq!(class, json!("point in-alarm p-high"));
    browser.screenshot("overview").await;
    browser.assert_accessible("the plant overview").await;
    // The check finds what it is for: a button nobody can name.
    browser
        .run("document.getElementById('overview-tiles').append(Object.assign(document.createElement('button'), { id: 'nameless' }));", vec![])
        .await;
    let found = browser.accessibility_violations().await;
    assert!(
        found.as_array().is_some_and(|found| found
            .iter()
            .any(|finding| finding.as_str().is_some_and(|text| text.contains("button-name")))),
        "{found}"
    );
    browser
        .run("document.getElementById('nameless').remove();", vec![])
        .await;
    // What the page costs its device, as Chromium counts it (the bench's main-thread row).
    let busy = browser.main_thread_seconds().await;
    assert!(
        busy > 0.0 && busy < 60.0,
        "the page's main thread worked {busy} s"
    );

    // The keyboard alone opens an area: its display has a tile per equipment.
    browser
        .run(
            "document.querySelector('#overview-tiles .tile-title button').focus();",
            vec![],
        )
        .await;
    browser.keys("\u{E007}").await;
    browser
        .wait_text("#overview-title", "Area 1's display", |title| title == "Area1")
        .await;
    assert_eq!(
        texts(&browser, "#overview-tiles .tile-title").await,
        json!(["Pump1", "Motor1", "Pump2", "Tank1"])
    );
    assert_eq!(
        texts(&browser, "#overview-crumbs li").await,
        json!(["Plant overview", "Area1"])
    );
    // Each equipment's values: key ones first, then those with alarms; states as words.
    assert_eq!(
        texts(&browser, "#overview-tiles .tile:first-child .point-label").await,
        json!(["Flow Rate", "Discharge Pressure", "Motor Current", "Start Count"])
    );
    write(&guest, "Pump1.Mode", WriteValue::Text("Manual".to_owned())).await;
    browser
        .wait_text(
            &format!("{} .state-word", state("Pump1.Mode")),
            "the mode off normal",
            |text| text == "Manual (normal: Auto)",
        )
        .await;
    write(&guest, "Pump1.StartCount", WriteValue::Integer(1300)).await;
    browser
        .wait_text(
            &format!("{} .value", point("Pump1.StartCount")),
            "a live value",
            |text| text == "1300",
        )
        .await;
    // The last hour of each value, from its history.
    browser
        .wait_visible(&format!("{} .spark", point("Pump1.FlowRate")))
        .await;
    browser.screenshot("overview-area").await;
    assert_within_the_screen(&browser, "#view-overview").await;
    browser.assert_accessible("an area's display").await;

    // A value opens its detail: its folder in the plant tree, and its trend.
    browser
        .click(&format!("{} .point-label", point("Pump1.FlowRate")))
        .await;
    browser
        .wait_text("#folder-title", "the tag's folder", |title| {
            title == "Plant/Area1/Pump1"
        })
        .await;
    browser
        .wait_text("#trend-title", "the tag's trend", |title| {
            title == "Trend: Plant/Area1/Pump1/FlowRate"
        })
        .await;
    // What it is, its alarms as they stand, and the documents about its equipment.
    browser
        .wait_text("#detail-title", "the tag's detail", |title| {
            title == "Pump1.FlowRate"
        })
        .await;
    browser
        .wait_text("#detail-alarms", "its alarm", |text| {
            text.contains("Deviation ±20 from 85: normal")
        })
        .await;
    browser
        .wait_text("#detail-documents", "the procedure about Pump 1", |text| {
            text.contains("procedures/pump-high-motor-current.md, lines")
        })
        .await;
    browser.screenshot("tag-detail").await;
    browser.assert_accessible("a tag's detail").await;

    // A desk's screen, then a phone's: the overview fits either.
    browser.click("#tab-overview").await;
    browser.click("#overview-crumbs button[data-folder=\"\"]").await;
    browser
        .wait_text("#overview-title", "back to the plant", |title| {
            title == "Plant overview"
        })
        .await;
    browser.resize(1280, 800).await;
    browser.screenshot("overview-1280x800").await;
    browser.resize(PHONE.0, PHONE.1).await;
    browser.wait_visible(&point("Tank1.Level")).await;
    assert_within_the_screen(&browser, "#view-overview").await;
    browser.screenshot("overview-phone").await;
    browser.assert_accessible("the plant overview on a phone").await;
    browser
        .click("#overview-tiles .tile:first-child .tile-title button")
        .await;
    browser
        .wait_text("#overview-title", "Area 1 on a phone", |title| title == "Area1")
        .await;
    browser.wait_visible(&point("Pump1.StartCount")).await;
    assert_within_the_screen(&browser, "#view-overview").await;
    browser.screenshot("overview-area-phone").await;
    assert_no_violations(&browser).await;
}
