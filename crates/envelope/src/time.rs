//! Times as the envelope writes them: ISO 8601 UTC with milliseconds, for every `SystemTime`.

use std::time::{SystemTime, UNIX_EPOCH};

/// The last millisecond RFC 3339's four-digit years can write: 9999-12-31T23:59:59.999Z, as
/// milliseconds since the Unix epoch.
pub const LAST_RFC3339_MILLIS: u64 = 253_402_300_799_999;

const MILLIS_PER_DAY: i128 = 86_400_000;

/// Formats a time as ISO 8601 UTC with milliseconds, e.g. `2026-04-26T14:32:15.123Z`. Any
/// time formats: a year outside 0000-9999 (a publisher's clock gone wrong, a timestamp read as
/// the wrong unit) takes ISO 8601's expanded form, a sign and at least six digits
/// (`+011970-01-01T00:00:00.000Z`), where a formatting library refuses or panics.
pub fn iso8601_millis(time: SystemTime) -> String {
    let millis = match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_millis()).unwrap_or(i128::MAX),
        // Before the epoch: the millisecond that holds the time, so -0.5 ms is -1 ms.
        Err(before) => {
            let before = before.duration();
            let whole = i128::try_from(before.as_millis()).unwrap_or(i128::MAX);
            -whole - i128::from(before.subsec_nanos() % 1_000_000 != 0)
        }
    };
    let (days, of_day) = (
        millis.div_euclid(MILLIS_PER_DAY),
        millis.rem_euclid(MILLIS_PER_DAY),
    );
    let (year, month, day) = civil_from_days(days);
    let mut text = String::with_capacity(24);
    if (0..=9999).contains(&year) {
        push_digits(&mut text, year, 4);
    } else {
        text.push(if year < 0 { '-' } else { '+' });
        push_digits(&mut text, year.abs(), 6);
    }
    for (separator, value, width) in [
        ('-', month, 2),
        ('-', day, 2),
        ('T', of_day / 3_600_000, 2),
        (':', of_day / 60_000 % 60, 2),
        (':', of_day / 1000 % 60, 2),
        ('.', of_day % 1000, 3),
    ] {
        text.push(separator);
        push_digits(&mut text, value, width);
    }
    text.push('Z');
    text
}

/// Appends `value` (not negative) in decimal, zero-padded to at least `width` digits.
fn push_digits(text: &mut String, value: i128, width: usize) {
    let mut digits = [b'0'; 40];
    let mut at = digits.len();
    let mut rest = value;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let start = at.min(digits.len() - width.min(digits.len()));
    for &digit in &digits[start..] {
        text.push(char::from(digit));
    }
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01, for any
/// count (Howard Hinnant's `civil_from_days`, in 400-year eras).
fn civil_from_days(days: i128) -> (i128, i128, i128) {
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
    let year = year_of_era + era * 400 + i128::from(month <= 2);
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
