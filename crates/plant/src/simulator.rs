//! The plant simulator: moves the numeric tags the plant file gives a `simulate` motion
//! plausibly over time (a slow sine around the tag's initial value plus bounded noise, kept
//! inside the tag's range), so that alarms trip and clear and the historian fills.
//!
//! A value is a pure function of the tag and the time, so a test drives the simulator with
//! [`Simulator::step`] at times of its choosing and knows what to expect, with no sleeping.

use std::f64::consts::TAU;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use plant_model::ExpandedPlant;

use crate::plant::Plant;
use plant_model::{AlarmEvent, Quality, TagType, TagValue};
use store::SolutionError;

/// How one tag moves.
#[derive(Debug, Clone, PartialEq)]
pub struct TagMotion {
    /// The tag's dotted name.
    pub tag: String,
    /// Its type (number or integer).
    pub kind: TagType,
    /// The centre of the motion (the tag's initial value).
    pub base: f64,
    /// Half the swing of the sine.
    pub amplitude: f64,
    /// The sine's period.
    pub period: Duration,
    /// The sine's phase, in radians.
    pub phase: f64,
    /// The most the noise adds or takes away.
    pub noise: f64,
    /// The tag's range, which the value never leaves.
    pub range: (Option<f64>, Option<f64>),
}

impl TagMotion {
    /// The value at `time`.
    pub fn value_at(&self, time: SystemTime) -> f64 {
        let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        let seconds = since_epoch.as_secs_f64();
        let angle = TAU * seconds / self.period.as_secs_f64() + self.phase;
        let noise = self.noise * unit_noise(&self.tag, since_epoch.as_secs());
        let mut value = self.base + self.amplitude * angle.sin() + noise;
        if let Some(low) = self.range.0 {
            value = value.max(low);
        }
        if let Some(high) = self.range.1 {
            value = value.min(high);
        }
        value
    }
}

/// The simulator of one solution's plant. Clones share the motions, which a plant reload
/// replaces.
#[derive(Debug, Clone)]
pub struct Simulator {
    plant: Plant,
    motions: Arc<ArcSwap<Vec<TagMotion>>>,
}

impl Simulator {
    /// The simulator of the plant's definitions (the tags with a `simulate` motion); every such
    /// tag must be a numeric tag of the plant with an initial value.
    pub fn new(plant: Plant, definitions: &ExpandedPlant) -> Result<Self, SolutionError> {
        let motions = motions_of(definitions)?;
        Ok(Self {
            plant,
            motions: Arc::new(ArcSwap::from_pointee(motions)),
        })
    }

    /// Takes the motions of new definitions (a plant reload).
    pub fn reload(&self, definitions: &ExpandedPlant) -> Result<(), SolutionError> {
        self.motions.store(Arc::new(motions_of(definitions)?));
        Ok(())
    }

    /// The tags it moves.
    pub fn motions(&self) -> Arc<Vec<TagMotion>> {
        self.motions.load_full()
    }

    /// Moves every simulated tag to its value at `time` (Good quality), queuing history and
    /// returning the alarm transitions this caused.
    pub fn step(&self, time: SystemTime) -> Vec<AlarmEvent> {
        let mut events = Vec::new();
        for motion in self.motions.load().iter() {
            let value = motion.value_at(time);
            let value = match motion.kind {
                // The range clamp keeps the value far inside i64.
                TagType::Integer => TagValue::Integer(value.round() as i64),
                _ => TagValue::Number((value * 1000.0).round() / 1000.0),
            };
            match self.plant.write_at(&motion.tag, value, Quality::GOOD, time) {
                Ok(caused) => events.extend(caused),
                // `load` checked every tag exists with a numeric type; this cannot happen, but
                // a simulator is not worth a panic.
                Err(error) => tracing::warn!(%error, "simulator write refused"),
            }
        }
        events
    }

    /// Steps through `from..=to` every `every`: how a new demo solution gets its history.
    pub fn replay(&self, from: SystemTime, to: SystemTime, every: Duration) -> usize {
        let mut steps = 0;
        let mut time = from;
        while time <= to && !every.is_zero() {
            self.step(time);
            steps += 1;
            time += every;
        }
        steps
    }
}

/// The motions of the tags of `definitions` that have one.
fn motions_of(definitions: &ExpandedPlant) -> Result<Vec<TagMotion>, SolutionError> {
    let mut motions = Vec::new();
    for tag in &definitions.tags {
        let Some(motion) = &tag.simulate else { continue };
        let invalid = |reason: &str| SolutionError::InvalidTag {
            name: tag.name.clone(),
            reason: format!("cannot be simulated: {reason}"),
        };
        let kind = tag.kind;
        if !matches!(kind, TagType::Number | TagType::Integer) {
            return Err(invalid("only number and integer tags move"));
        }
        let base = tag
            .initial
            .as_ref()
            .and_then(plant_model::InitialValue::as_f64)
            .ok_or_else(|| invalid("it needs a numeric initial value to move around"))?;
        let period = Duration::try_from_secs_f64(motion.period)
            .ok()
            .filter(|period| !period.is_zero())
            .ok_or_else(|| invalid("the period must be a positive number of seconds"))?;
        motions.push(TagMotion {
            tag: tag.name.clone(),
            kind,
            base,
            amplitude: motion.amplitude,
            period,
            phase: motion.phase,
            noise: motion.noise,
            range: (tag.min, tag.max),
        });
    }
    Ok(motions)
}

/// Deterministic noise in [-1, 1] for a tag and a whole second (SplitMix64 of both).
fn unit_noise(tag: &str, second: u64) -> f64 {
    let name_hash = tag.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut z = name_hash ^ second.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // The top 53 bits make an exact f64 in [0, 1).
    let unit = (z >> 11) as f64 / (1_u64 << 53) as f64;
    unit * 2.0 - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_bounded_and_repeatable() {
        for second in 0..10_000 {
            let noise = unit_noise("Tank1.Level", second);
            assert!((-1.0..=1.0).contains(&noise));
            assert_eq!(noise, unit_noise("Tank1.Level", second));
        }
        assert_ne!(unit_noise("Tank1.Level", 7), unit_noise("Tank2.Level", 7));
    }

    #[test]
    fn motion_follows_its_sine_and_stays_in_range() {
        let motion = TagMotion {
            tag: "T".into(),
            kind: TagType::Number,
            base: 50.0,
            amplitude: 60.0,
            period: Duration::from_secs(400),
            phase: 0.0,
            noise: 0.0,
            range: (Some(0.0), Some(100.0)),
        };
        let at = |seconds| UNIX_EPOCH + Duration::from_secs(seconds);
        assert!((motion.value_at(at(0)) - 50.0).abs() < 1e-9);
        assert_eq!(
            motion.value_at(at(100)),
            100.0,
            "the peak is clamped to the range"
        );
        assert_eq!(
            motion.value_at(at(300)),
            0.0,
            "the trough is clamped to the range"
        );
    }
}
