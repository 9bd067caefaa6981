//! Time as the domain sees it: a monotonic reading for schedules and a wall-clock timestamp for
//! records. Both come from the [`Clock`] port so that tests can drive time by hand.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Serialize, Serializer};

/// A monotonic instant, measured from an origin the clock chooses. Only differences matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MonoTime(Duration);

impl MonoTime {
    pub const fn from_duration(since_origin: Duration) -> Self {
        Self(since_origin)
    }

    pub const fn as_duration(self) -> Duration {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, zero when `earlier` is later.
    pub fn saturating_since(self, earlier: MonoTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    #[must_use]
    pub fn plus(self, duration: Duration) -> Self {
        Self(self.0.saturating_add(duration))
    }
}

/// A wall-clock instant in UTC with microsecond precision.
///
/// It renders as ISO 8601 without a zone offset, e.g. `2026-11-21T14:03:07.123456`, which is the
/// format the REST API promises for log lines and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp {
    micros_since_epoch: i64,
}

impl Timestamp {
    pub const fn from_unix_micros(micros_since_epoch: i64) -> Self {
        Self { micros_since_epoch }
    }

    pub const fn unix_micros(self) -> i64 {
        self.micros_since_epoch
    }

    #[must_use]
    pub fn plus(self, duration: Duration) -> Self {
        let micros = i64::try_from(duration.as_micros()).unwrap_or(i64::MAX);
        Self::from_unix_micros(self.micros_since_epoch.saturating_add(micros))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micros = self.micros_since_epoch;
        let seconds = micros.div_euclid(1_000_000);
        let fraction = micros.rem_euclid(1_000_000);
        let days = seconds.div_euclid(86_400);
        let second_of_day = seconds.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{fraction:06}",
            second_of_day / 3600,
            (second_of_day % 3600) / 60,
            second_of_day % 60
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Converts days since 1970-01-01 into a proleptic Gregorian (year, month, day).
/// The algorithm is Howard Hinnant's `civil_from_days`.
fn civil_from_days(days_since_epoch: i64) -> (i64, u32, u32) {
    let shifted = days_since_epoch + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The clock port. The bundled server uses the system clock and the tokio timer; tests use a
/// fake whose time only moves when the test says so.
#[async_trait]
pub trait Clock: Send + Sync + 'static {
    /// A monotonic reading, for schedules (health checks, idle reaping, backoff).
    fn now(&self) -> MonoTime;
    /// The wall-clock time, for records shown to people (log lines, events).
    fn wall(&self) -> Timestamp;
    /// Completes once `duration` has passed on this clock.
    async fn sleep(&self, duration: Duration);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_render_iso_8601_with_microseconds_and_no_offset() {
        assert_eq!(
            Timestamp::from_unix_micros(0).to_string(),
            "1970-01-01T00:00:00.000000"
        );
        // 2026-11-21T14:03:07.123456 UTC
        let stamp = Timestamp::from_unix_micros(1_795_269_787_123_456);
        assert_eq!(stamp.to_string(), "2026-11-21T14:03:07.123456");
        // A leap day.
        let leap = Timestamp::from_unix_micros(951_782_400_000_001);
        assert_eq!(leap.to_string(), "2000-02-29T00:00:00.000001");
        // Before the epoch.
        assert_eq!(
            Timestamp::from_unix_micros(-1).to_string(),
            "1969-12-31T23:59:59.999999"
        );
    }

    #[test]
    fn mono_time_differences_saturate() {
        let early = MonoTime::from_duration(Duration::from_secs(5));
        let late = early.plus(Duration::from_secs(3));
        assert_eq!(late.saturating_since(early), Duration::from_secs(3));
        assert_eq!(early.saturating_since(late), Duration::ZERO);
    }
}
