//! Times as the envelope writes them: ISO 8601 UTC with milliseconds, for every `SystemTime`.

use std::time::{SystemTime, UNIX_EPOCH};

/// The last millisecond RFC 3339's four-digit years can write: 9999-12-31T23:59:59.999Z, as
/// milliseconds since the Unix epoch.
pub const LAST_RFC3339_MILLIS: u64 = 253_402_300_799_999;

/// Formats a time as ISO 8601 UTC with milliseconds, e.g. `2026-04-26T14:32:15.123Z`. Any
/// time formats: a year outside 0000-9999 (a publisher's clock gone wrong, a timestamp read as
/// the wrong unit) takes ISO 8601's expanded form, a sign and at least six digits
/// (`+011970-01-01T00:00:00.000Z`), where a formatting library refuses or panics.
pub fn iso8601_millis(time: SystemTime) -> String {
    // Whole seconds and the millisecond within, both taken downwards (-0.5 ms is -1 ms).
    let (seconds, millis) = match time.duration_since(UNIX_EPOCH) {
        Ok(after) => (
            i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
            after.subsec_millis(),
        ),
        Err(before) => {
            let before = before.duration();
            let seconds = i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
            match before.subsec_nanos().div_ceil(1_000_000) {
                0 => (-seconds, 0),
                part => (-seconds - 1, 1000 - part),
            }
        }
    };
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let (hour, minute, second) = (second_of_day / 3600, second_of_day / 60 % 60, second_of_day % 60);
    if !(0..=9999).contains(&year) {
        let sign = if year < 0 { '-' } else { '+' };
        return format!(
            "{sign}{:06}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z",
            year.unsigned_abs()
        );
    }
    // Every tool result and trace entry carries one: written into place, not through `fmt`.
    let mut text = *b"0000-00-00T00:00:00.000Z";
    for (at, width, value) in [
        (0, 4, year),
        (5, 2, month),
        (8, 2, day),
        (11, 2, hour),
        (14, 2, minute),
        (17, 2, second),
        (20, 3, i64::from(millis)),
    ] {
        let mut rest = value.unsigned_abs();
        for digit in text[at..at + width].iter_mut().rev() {
            *digit = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
    }
    String::from_utf8(text.to_vec()).unwrap_or_default()
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, in 400-year eras). Every `SystemTime` is in range: its seconds
/// are an `i64`, so its days are under 2^47.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    fn at(millis: i128) -> SystemTime {
        let magnitude = Duration::from_millis(u64::try_from(millis.unsigned_abs()).expect("in range"));
        if millis >= 0 {
            UNIX_EPOCH + magnitude
        } else {
            UNIX_EPOCH - magnitude
        }
    }

    #[test]
    fn known_times_format_as_rfc3339_with_milliseconds() {
        for (millis, text) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_777_213_935_123, "2026-04-26T14:32:15.123Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (4_107_456_000_000, "2100-02-28T00:00:00.000Z"),
            (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (-62_135_596_800_000, "0001-01-01T00:00:00.000Z"),
            (LAST_RFC3339_MILLIS as i128, "9999-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(iso8601_millis(at(millis)), text, "{millis}");
        }
    }

    #[test]
    fn a_part_of_a_millisecond_before_the_epoch_is_in_the_millisecond_before() {
        assert_eq!(
            iso8601_millis(UNIX_EPOCH - Duration::from_micros(500)),
            "1969-12-31T23:59:59.999Z"
        );
        assert_eq!(
            iso8601_millis(UNIX_EPOCH + Duration::from_micros(1_999)),
            "1970-01-01T00:00:00.001Z"
        );
    }

    #[test]
    fn years_past_four_digits_take_the_expanded_form_and_never_panic() {
        assert_eq!(
            iso8601_millis(at(LAST_RFC3339_MILLIS as i128 + 1)),
            "+010000-01-01T00:00:00.000Z"
        );
        assert_eq!(
            iso8601_millis(at(-62_167_219_200_001)),
            "-000001-12-31T23:59:59.999Z"
        );
        // The largest Unix milliseconds a payload can carry: year 584,556,019.
        let far = iso8601_millis(UNIX_EPOCH + Duration::from_millis(u64::MAX));
        assert!(far.starts_with("+584556019-"), "{far}");
        assert!(far.ends_with(".615Z"), "{far}");
        // The ends of what a `SystemTime` holds here.
        let extremes: Vec<SystemTime> = [
            UNIX_EPOCH.checked_add(Duration::new(i64::MAX as u64, 999_999_999)),
            UNIX_EPOCH.checked_sub(Duration::new(i64::MAX as u64, 0)),
            UNIX_EPOCH.checked_sub(Duration::new(i64::MAX as u64 - 1, 1)),
        ]
        .into_iter()
        .flatten()
        .collect();
        assert_eq!(
            extremes.len(),
            3,
            "a SystemTime holds i64 seconds on this platform"
        );
        for extreme in extremes {
            let text = iso8601_millis(extreme);
            assert!(text.starts_with(['+', '-']) && text.ends_with('Z'), "{text}");
        }
    }

    proptest! {
        /// Within RFC 3339's years, the text reads back (RFC 3339 parser) as the time cut to
        /// its millisecond.
        #[test]
        fn every_rfc3339_time_reads_back(millis in 0..=LAST_RFC3339_MILLIS, micros in 0u64..1000) {
            let time = UNIX_EPOCH + Duration::from_millis(millis) + Duration::from_micros(micros);
            let text = iso8601_millis(time);
            prop_assert_eq!(text.len(), 24);
            let read = humantime::parse_rfc3339(&text).expect("RFC 3339");
            prop_assert_eq!(read, UNIX_EPOCH + Duration::from_millis(millis));
        }
    }
}
