//! `tserver alarms report` against an independent computation: a generated alarm history
//! (trips, clears, acknowledgements, shelving, suppression and service, a flood, a chattering
//! alarm and a stale one) is stored, reported as JSON, and every figure compared with what a
//! brute-force reading of the same events gives; the same history in PostgreSQL reports alike.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plant_model::{AlarmEvent, AlarmEventKind, Condition};
use serde_json::{Value, json};
use store::test_database::TestDatabase;
use store::{HistoryLimits, SolutionLocation, Store};

use crate::support::{Solution, admin};

const PERIOD_MS: u64 = 600_000;

/// A small deterministic generator (xorshift64*): the same history on every run.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn ms(time: SystemTime) -> u64 {
    u64::try_from(time.duration_since(UNIX_EPOCH).expect("after 1970").as_millis()).expect("fits")
}

/// 2026-11-01T00:00:00Z.
const FROM_MS: u64 = 1_793_491_200_000;
/// Two days and 7 minutes later: the last period is shorter.
const UNTIL_MS: u64 = FROM_MS + 2 * 86_400_000 + 7 * 60_000;

/// A history of 12 alarms from a day and a half before the window to an hour past it, each
/// event of an alarm after its last one, sorted by time.
fn history() -> Vec<AlarmEvent> {
    let mut random = Random(0x005E_ED0F_A1A2);
    let mut events = Vec::new();
    let priorities = [300, 500, 650, 700, 850, 900, 200, 450, 550, 610, 820, 100, 400];
    for (index, priority) in priorities.iter().enumerate() {
        let alarm = format!("Area.A{index:02}");
        let event = |kind: AlarmEventKind, time: u64| AlarmEvent {
            time: at(time),
            alarm: alarm.clone(),
            tag: format!("Area.T{index:02}"),
            condition: Condition::Hi,
            kind,
            value: matches!(kind, AlarmEventKind::Active | AlarmEventKind::Cleared).then_some(90.0),
            priority: *priority,
            message: format!("A{index:02} high"),
            user: (!matches!(
                kind,
                AlarmEventKind::Active
                    | AlarmEventKind::Cleared
                    | AlarmEventKind::Suppressed
                    | AlarmEventKind::Unsuppressed
            ))
            .then(|| "ops".to_owned()),
            reason: matches!(
                kind,
                AlarmEventKind::Shelved | AlarmEventKind::OutOfService | AlarmEventKind::Suppressed
            )
            .then(|| "test".to_owned()),
            until: (kind == AlarmEventKind::Shelved).then(|| at(time + 3_600_000)),
        };
        let mut time = FROM_MS - 36 * 3_600_000 + random.below(3_600_000);
        let (mut in_alarm, mut shelved, mut out, mut suppressed) = (false, false, false, false);
        if index == 7 {
            // Trips before the window and never clears: stale at its end.
            events.push(event(AlarmEventKind::Active, time));
            continue;
        }
        if index == 12 {
            // Chatters twice: a trip every 20 s for 5 minutes, a day apart.
            for start in [FROM_MS + 3 * 3_600_000, FROM_MS + 27 * 3_600_000] {
                for trip in 0..15 {
                    events.push(event(AlarmEventKind::Active, start + trip * 20_000));
                    events.push(event(AlarmEventKind::Cleared, start + trip * 20_000 + 5_000));
                }
            }
            continue;
        }
        while time < UNTIL_MS + 3_600_000 {
            let flood = (FROM_MS + 10 * 3_600_000..FROM_MS + 10 * 3_600_000 + 1_200_000).contains(&time);
            time += if flood {
                5_000 + random.below(40_000)
            } else {
                60_000 + random.below(6_000_000)
            };
            let roll = random.below(100);
            let handled = shelved || out || suppressed;
            let kind = match (in_alarm, roll) {
                // A handling begins now and then and mostly ends soon after.
                (_, 0..=29) if handled => toggle(roll, (&mut shelved, &mut out, &mut suppressed)),
                (_, 0..=2) => toggle(roll, (&mut shelved, &mut out, &mut suppressed)),
                (true, 3..=54) => AlarmEventKind::Cleared,
                (true, _) => AlarmEventKind::Acknowledged,
                (false, 3..=89) => AlarmEventKind::Active,
                (false, _) => AlarmEventKind::Acknowledged,
            };
            match kind {
                AlarmEventKind::Active => in_alarm = true,
                AlarmEventKind::Cleared => in_alarm = false,
                _ => {}
            }
            events.push(event(kind, time));
        }
    }
    events.sort_by_key(|event| event.time);
    events
}

/// A change of handling: the one that holds ends, else one of shelving, service or suppression
/// begins.
fn toggle(roll: u64, (shelved, out, suppressed): (&mut bool, &mut bool, &mut bool)) -> AlarmEventKind {
    let which = if *out {
        1
    } else if *shelved {
        0
    } else if *suppressed {
        2
    } else {
        roll % 3
    };
    match which {
        0 if !*out => {
            *shelved = !*shelved;
            if *shelved {
                AlarmEventKind::Shelved
            } else if roll.is_multiple_of(2) {
                AlarmEventKind::Unshelved
            } else {
                AlarmEventKind::ShelvingExpired
            }
        }
        1 => {
            *out = !*out;
            if *out {
                *shelved = false;
                AlarmEventKind::OutOfService
            } else {
                AlarmEventKind::InService
            }
        }
        _ => {
            *suppressed = !*suppressed;
            if *suppressed {
                AlarmEventKind::Suppressed
            } else {
                AlarmEventKind::Unsuppressed
            }
        }
    }
}

/// How each alarm's handling stands just before `index`, read from every event of it before.
fn handled_before(events: &[AlarmEvent], index: usize) -> bool {
    let alarm = &events[index].alarm;
    let (mut shelved, mut out, mut suppressed) = (false, false, false);
    for event in events[..index].iter().filter(|event| &event.alarm == alarm) {
        match event.kind {
            AlarmEventKind::Shelved => shelved = true,
            AlarmEventKind::Unshelved | AlarmEventKind::ShelvingExpired => shelved = false,
            AlarmEventKind::OutOfService => (out, shelved) = (true, false),
            AlarmEventKind::InService => out = false,
            AlarmEventKind::Suppressed => suppressed = true,
            AlarmEventKind::Unsuppressed => suppressed = false,
            _ => {}
        }
    }
    shelved || out || suppressed
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// Every figure of the report, computed the slow way from the events.
fn expected(events: &[AlarmEvent]) -> Value {
    let in_window = |event: &AlarmEvent| (FROM_MS..=UNTIL_MS).contains(&ms(event.time));
    let window: Vec<usize> = (0..events.len())
        .filter(|index| in_window(&events[*index]))
        .collect();
    let activations: Vec<usize> = window
        .iter()
        .copied()
        .filter(|index| events[*index].kind == AlarmEventKind::Active)
        .collect();
    let annunciated: Vec<usize> = activations
        .iter()
        .copied()
        .filter(|index| !handled_before(events, *index))
        .collect();
    let times: Vec<u64> = annunciated.iter().map(|index| ms(events[*index].time)).collect();

    let (mut peak, mut peak_at) = (0, None);
    for start in &times {
        let count = times
            .iter()
            .filter(|time| (*start..start + PERIOD_MS).contains(time))
            .count();
        if count > peak {
            (peak, peak_at) = (count, Some(*start));
        }
    }
    let periods = (UNTIL_MS - FROM_MS).div_ceil(PERIOD_MS);
    let mut per_period = vec![0_u32; usize::try_from(periods).expect("fits")];
    for time in &times {
        per_period[usize::try_from((time - FROM_MS) / PERIOD_MS).expect("fits")] += 1;
    }
    let flood_periods = per_period.iter().filter(|count| **count > 10).count();

    let mut by_alarm: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for index in &activations {
        by_alarm
            .entry(&events[*index].alarm)
            .or_default()
            .push(ms(events[*index].time));
    }
    let mut frequent: Vec<(&str, usize)> = by_alarm
        .iter()
        .map(|(alarm, trips)| (*alarm, trips.len()))
        .collect();
    frequent.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    frequent.truncate(10);
    let mut chattering: Vec<(&str, usize)> = by_alarm
        .iter()
        .map(|(alarm, trips)| {
            let within = |newer: usize, older: usize| trips[newer] - trips[older] <= 60_000;
            let episodes = (2..trips.len())
                .filter(|i| within(*i, i - 2) && !(*i >= 3 && within(i - 1, i - 3) && within(*i, i - 1)))
                .count();
            (*alarm, episodes)
        })
        .filter(|(_, episodes)| *episodes > 0)
        .collect();
    chattering.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));

    let mut stale = Vec::new();
    let mut alarms: Vec<&str> = events.iter().map(|event| event.alarm.as_str()).collect();
    alarms.sort_unstable();
    alarms.dedup();
    for alarm in &alarms {
        let last = events.iter().rev().find(|event| {
            event.alarm == *alarm
                && ms(event.time) <= UNTIL_MS
                && matches!(event.kind, AlarmEventKind::Active | AlarmEventKind::Cleared)
        });
        if let Some(last) = last.filter(|last| last.kind == AlarmEventKind::Active)
            && UNTIL_MS - ms(last.time) > 86_400_000
        {
            stale.push((ms(last.time), *alarm));
        }
    }
    stale.sort_unstable();

    let mut bands = [0_u64; 3];
    for index in &annunciated {
        bands[match events[*index].priority {
            800.. => 2,
            600..=799 => 1,
            _ => 0,
        }] += 1;
    }
    let share = |count: u64| round2(count as f64 * 100.0 / annunciated.len() as f64);

    let mut delays = Vec::new();
    let mut unacknowledged = 0;
    for (place, index) in annunciated.iter().enumerate() {
        let alarm = &events[*index].alarm;
        let next = annunciated[place + 1..]
            .iter()
            .copied()
            .find(|later| &events[*later].alarm == alarm)
            .unwrap_or(events.len());
        let acknowledged = window.iter().copied().find(|later| {
            *later > *index
                && *later < next
                && &events[*later].alarm == alarm
                && events[*later].kind == AlarmEventKind::Acknowledged
        });
        match acknowledged {
            Some(ack) => delays.push(ms(events[ack].time) - ms(events[*index].time)),
            None => unacknowledged += 1,
        }
    }
    delays.sort_unstable();
    let nearest_rank = |fraction: f64| {
        let rank = ((fraction * delays.len() as f64).ceil() as usize).max(1);
        delays[rank - 1] as f64 / 1000.0
    };

    let handling = |begins: AlarmEventKind| {
        let mut alarms: Vec<&str> = Vec::new();
        let mut times = 0;
        for (index, event) in events.iter().enumerate() {
            if ms(event.time) > UNTIL_MS || event.kind != begins {
                continue;
            }
            // Handled at the window's start (its last change of this kind before it began it),
            // or begun within the window.
            let counts = if in_window(event) {
                times += 1;
                true
            } else {
                let ends: &[AlarmEventKind] = match begins {
                    AlarmEventKind::Shelved => &[
                        AlarmEventKind::Unshelved,
                        AlarmEventKind::ShelvingExpired,
                        AlarmEventKind::OutOfService,
                    ],
                    AlarmEventKind::OutOfService => &[AlarmEventKind::InService],
                    _ => &[AlarmEventKind::Unsuppressed],
                };
                !events[index + 1..].iter().any(|later| {
                    later.alarm == event.alarm
                        && ms(later.time) < FROM_MS
                        && (ends.contains(&later.kind) || later.kind == begins)
                })
            };
            if counts && !alarms.contains(&event.alarm.as_str()) {
                alarms.push(&event.alarm);
            }
        }
        json!({"alarms": alarms.len(), "times": times})
    };

    json!({
        "activations": activations.len(),
        "annunciated": annunciated.len(),
        "averagePer10Min": round2(annunciated.len() as f64 * PERIOD_MS as f64 / (UNTIL_MS - FROM_MS) as f64),
        "peakPer10Min": peak,
        "peakAt": peak_at.map(|time| localai::iso8601_millis(at(time))),
        "periods": periods,
        "floodPeriods": flood_periods,
        "timeInFloodPercent": round2(flood_periods as f64 * 100.0 / periods as f64),
        "mostFrequent": frequent.iter().map(|(alarm, count)| json!([alarm, count])).collect::<Vec<_>>(),
        "chattering": chattering.iter().map(|(alarm, count)| json!([alarm, count])).collect::<Vec<_>>(),
        "stale": stale.iter().map(|(since, alarm)| json!([alarm, localai::iso8601_millis(at(*since))])).collect::<Vec<_>>(),
        "priorities": [share(bands[0]), share(bands[1]), share(bands[2])],
        "acknowledged": delays.len(),
        "unacknowledged": unacknowledged,
        "acknowledgeMedianS": nearest_rank(0.5),
        "acknowledgeP90S": nearest_rank(0.9),
        "shelved": handling(AlarmEventKind::Shelved),
        "suppressed": handling(AlarmEventKind::Suppressed),
        "outOfService": handling(AlarmEventKind::OutOfService),
    })
}

/// The report's figures in the shape [`expected`] gives them.
fn figures(report: &Value) -> Value {
    let pairs = |key: &str, count: &str| -> Vec<Value> {
        report[key]
            .as_array()
            .expect("a list")
            .iter()
            .map(|entry| json!([entry["alarm"], entry[count]]))
            .collect()
    };
    let mut figures = json!({});
    for key in [
        "activations",
        "annunciated",
        "averagePer10Min",
        "peakPer10Min",
        "peakAt",
        "periods",
        "floodPeriods",
        "timeInFloodPercent",
        "acknowledged",
        "unacknowledged",
        "acknowledgeMedianS",
        "acknowledgeP90S",
        "shelved",
        "suppressed",
        "outOfService",
    ] {
        figures[key] = report[key].clone();
    }
    figures["mostFrequent"] = json!(pairs("mostFrequent", "activations"));
    figures["chattering"] = json!(pairs("chattering", "episodes"));
    figures["stale"] = json!(pairs("stale", "since"));
    figures["priorities"] = json!(
        report["priorities"]
            .as_array()
            .expect("bands")
            .iter()
            .map(|band| band["percent"].clone())
            .collect::<Vec<_>>()
    );
    figures
}

fn report(solution: &str, format: &str) -> String {
    let (from, until) = (
        humantime::format_rfc3339(at(FROM_MS)).to_string(),
        humantime::format_rfc3339(at(UNTIL_MS)).to_string(),
    );
    admin(
        &[
            "alarms", solution, "report", "--since", &from, "--until", &until, "--format", format,
        ],
        "",
    )
}

#[tokio::test]
async fn the_report_of_a_generated_history_matches_an_independent_computation() {
    let events = history();
    let expected = expected(&events);
    // The history exercises what it is meant to.
    assert!(expected["floodPeriods"].as_u64() > Some(0), "{expected}");
    assert!(
        expected["chattering"]
            .as_array()
            .is_some_and(|alarms| !alarms.is_empty())
    );
    assert_eq!(expected["stale"][0][0], "Area.A07");
    for handling in ["shelved", "suppressed", "outOfService"] {
        assert!(
            expected[handling]["times"].as_u64() > Some(0),
            "{handling}: {expected}"
        );
    }
    assert!(expected["unacknowledged"].as_u64() > Some(0));

    let solution = Solution::empty();
    let store = Store::open(&SolutionLocation::File(solution.path.clone()))
        .await
        .expect("opens");
    store
        .write_history_blocking(&[], &events, &HistoryLimits::NONE)
        .expect("stores the history");
    drop(store);
    let path = solution.path.to_str().expect("utf-8");
    let json: Value = serde_json::from_str(&report(path, "json")).expect("JSON");
    assert_eq!(figures(&json), expected);
    assert_eq!(json["eventsRead"], json["eventsTotal"], "every event read");

    // The same figures in the other formats.
    let markdown = report(path, "md");
    let peak = format!(
        "| Alarms per 10 minutes, peak | {} from {} | at most 10 |",
        expected["peakPer10Min"],
        humantime::format_rfc3339_seconds(
            humantime::parse_rfc3339(expected["peakAt"].as_str().expect("a peak")).expect("a time")
        )
    );
    assert!(markdown.contains(&peak), "{peak} in {markdown}");
    assert!(markdown.contains("| Area.A07 | 2026-10-30T"), "{markdown}");
    let csv = report(path, "csv");
    assert!(csv.starts_with("section,name,value,unit,target\n"), "{csv}");
    assert!(
        csv.contains(&format!(
            "rate,peak_per_10_min,{},alarms,10\n",
            expected["peakPer10Min"]
        )),
        "{csv}"
    );

    // Over the wire, as the panel and tclient read it (a server keeps a week of history unless
    // told otherwise: this one a year, so the generated month-old history stays).
    solution.add_user("watch", "viewer", "watch-pw");
    admin(&["settings", path, "set", "HistoryRetentionHours", "8760"], "");
    let server = crate::support::TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let client = server.client().await;
    client.login("watch", "watch-pw").await.expect("logs in");
    let window = service_client::AlarmReportRequest {
        since_ms: i64::try_from(FROM_MS).expect("fits"),
        until_ms: i64::try_from(UNTIL_MS).expect("fits"),
    };
    let reply = client.alarm_report(window).await.expect("reports");
    assert_eq!(
        (
            reply.peak_per_10_min,
            reply.per_period.len() as u64,
            reply.annunciated
        ),
        (
            expected["peakPer10Min"].as_u64().expect("a peak"),
            expected["periods"].as_u64().expect("periods"),
            expected["annunciated"].as_u64().expect("a count")
        )
    );
    let named: Vec<Value> = reply
        .most_frequent
        .iter()
        .map(|count| json!([count.alarm, count.count]))
        .collect();
    assert_eq!(json!(named), expected["mostFrequent"]);
    let backwards = service_client::AlarmReportRequest {
        since_ms: window.until_ms,
        until_ms: window.since_ms,
    };
    let refused = client.alarm_report(backwards).await.expect_err("backwards");
    assert!(
        refused.to_string().contains("since_ms is not before until_ms"),
        "{refused}"
    );
    let login = [
        "--addr",
        &server.addr.to_string(),
        "--user",
        "watch",
        "--password-stdin",
    ];
    let (since, until) = (
        humantime::format_rfc3339(at(FROM_MS)).to_string(),
        humantime::format_rfc3339(at(UNTIL_MS)).to_string(),
    );
    let printed = crate::tclient::tclient(
        &[
            &login[..],
            &["alarms", "report", "--since", &since, "--until", &until],
        ]
        .concat(),
        "watch-pw\n",
        false,
    )
    .await
    .expect("reports");
    assert!(
        printed.contains(&format!(
            "{} annunciated of {} activations",
            expected["annunciated"], expected["activations"]
        )) && printed.contains("stale (in alarm over 24 h):\n  Area.A07 since 2026-10-30T"),
        "{printed}"
    );
    // The assistant's tool gives the same figures and the bad actors.
    let told = server
        .runtime
        .tools()
        .get("runtime_get_alarm_report")
        .expect("the report tool")
        .call(
            json!({"start": since, "end": until}),
            localai::tools::ToolCaller::Script {
                script: "Check".into(),
            },
            localai::tools::TOOL_TIMEOUT,
        )
        .await
        .expect("reports")
        .result;
    assert_eq!(figures(&told), expected);
    server.stop().await;

    // PostgreSQL reads the same standing and window.
    let database = TestDatabase::create().await;
    let url = database.url();
    let store = Store::open(&SolutionLocation::Postgres(
        store::PostgresUrl::parse(&url).expect("a URL"),
    ))
    .await
    .expect("opens");
    tokio::task::spawn_blocking(move || store.write_history_blocking(&[], &events, &HistoryLimits::NONE))
        .await
        .expect("writes")
        .expect("stores the history");
    let on_database: Value = serde_json::from_str(&report(&url, "json")).expect("JSON");
    assert_eq!(on_database, json);
}
