//! The compression settings: `compression.type` (librdkafka's `compression.codec` as an
//! alias) and the per-codec levels of KIP-390, with Java's ranges and defaults.

use crate::error::Error;
use crate::protocol::record_batch::{Codec, Compression};

use super::config_error;

pub(super) const COMPRESSION_TYPE: &str = "compression.type";
/// librdkafka's name for `compression.type`, accepted so its settings can be brought over.
pub(super) const COMPRESSION_CODEC: &str = "compression.codec";
pub(super) const GZIP_LEVEL: &str = "compression.gzip.level";
pub(super) const LZ4_LEVEL: &str = "compression.lz4.level";
pub(super) const ZSTD_LEVEL: &str = "compression.zstd.level";

/// zlib's "default level" (-1), which is level 6; Java's `GzipCompression.DEFAULT_LEVEL`.
const GZIP_DEFAULT: i32 = -1;
/// Java's `Lz4Compression.DEFAULT_LEVEL`.
const LZ4_DEFAULT: i32 = 9;
/// Java's `ZstdCompression.DEFAULT_LEVEL` (zstd's own default).
const ZSTD_DEFAULT: i32 = 3;
/// zstd's level range (`ZSTD_minCLevel()` to `ZSTD_maxCLevel()`), as Java validates it.
const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = -131_072..=22;

/// How batches are compressed, under Kafka's property names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompressionConfig {
    /// `compression.type`: `none`, `gzip`, `snappy`, `lz4` or `zstd`.
    pub codec: Codec,
    /// `compression.gzip.level`: 1 to 9, or -1 for zlib's default (6).
    pub gzip_level: i32,
    /// `compression.lz4.level`: 1 to 17, as in Java. Accepted so Java settings carry over,
    /// but not applied: the lz4 compressor here is the fast one, which is what Java uses at
    /// the default level 9 (it switches to lz4-java's high-compression mode for other levels).
    pub lz4_level: i32,
    /// `compression.zstd.level`: -131072 to 22 (negative levels are faster than 1).
    pub zstd_level: i32,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig {
            codec: Codec::None,
            gzip_level: GZIP_DEFAULT,
            lz4_level: LZ4_DEFAULT,
            zstd_level: ZSTD_DEFAULT,
        }
    }
}

impl CompressionConfig {
    /// Sets the codec and, where it has one, its level from a [`Compression`].
    pub(super) fn apply(&mut self, compression: Compression) {
        self.codec = compression.codec();
        match compression {
            Compression::Gzip { level } => {
                self.gzip_level = i32::try_from(level).unwrap_or(i32::MAX);
            }
            Compression::Zstd { level } => self.zstd_level = level,
            Compression::None | Compression::Snappy | Compression::Lz4 => {}
        }
    }

    /// Checks the ranges Java's `ConfigDef` checks, and that this build has the codec.
    pub(super) fn validate(&self) -> Result<(), Error> {
        if !self.codec.is_available() {
            return Err(config_error(
                COMPRESSION_TYPE,
                format!(
                    "{} is not in this build (cargo feature {:?} is off)",
                    self.codec,
                    self.codec.name()
                ),
            ));
        }
        if !(self.gzip_level == GZIP_DEFAULT || (1..=9).contains(&self.gzip_level)) {
            return Err(config_error(
                GZIP_LEVEL,
                format!("{} is not 1 to 9, or -1 for the default", self.gzip_level),
            ));
        }
        if !(1..=17).contains(&self.lz4_level) {
            return Err(config_error(
                LZ4_LEVEL,
                format!("{} is not 1 to 17", self.lz4_level),
            ));
        }
        if !ZSTD_LEVELS.contains(&self.zstd_level) {
            return Err(config_error(
                ZSTD_LEVEL,
                format!("{} is not -131072 to 22", self.zstd_level),
            ));
        }
        Ok(())
    }

    /// The compression batches are sealed with.
    pub fn compression(&self) -> Compression {
        match self.codec {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip {
                // -1 is zlib's default, level 6.
                level: u32::try_from(self.gzip_level).unwrap_or(6),
            },
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd {
                level: self.zstd_level,
            },
        }
    }
}

/// A codec by Kafka's name, lower case as Java's `ConfigDef` validator wants it.
pub(super) fn parse_codec(setting: &str, value: &str) -> Result<Codec, Error> {
    [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ]
    .into_iter()
    .find(|codec| codec.name() == value)
    .ok_or_else(|| {
        config_error(
            setting,
            format!("expected one of none, gzip, snappy, lz4, zstd; got {value:?}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compression settings of a producer configured with `props` alone (its table
    /// parses them).
    fn with(props: &[(&str, &str)]) -> Result<CompressionConfig, Error> {
        let mut config = super::super::ProducerConfig::default();
        for (key, value) in props {
            assert!(key.starts_with("compression."), "{key} is ours");
            config.set(key, value)?;
        }
        config.compression.validate()?;
        Ok(config.compression)
    }

    fn setting_of(result: Result<CompressionConfig, Error>) -> String {
        match result {
            Err(Error::Config { setting, .. }) => setting,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_javas() {
        let config = CompressionConfig::default();
        assert_eq!(config.compression(), Compression::None);
        assert_eq!(
            (config.gzip_level, config.lz4_level, config.zstd_level),
            (-1, 9, 3)
        );
    }

    #[cfg(all(
        feature = "gzip",
        feature = "snappy",
        feature = "lz4",
        feature = "zstd"
    ))]
    #[test]
    fn codecs_and_levels_parse() {
        let gzip = with(&[("compression.type", "gzip")]).unwrap();
        assert_eq!(gzip.compression(), Compression::Gzip { level: 6 });
        let gzip = with(&[
            ("compression.type", "gzip"),
            ("compression.gzip.level", "1"),
        ]);
        assert_eq!(gzip.unwrap().compression(), Compression::Gzip { level: 1 });
        let zstd = with(&[
            ("compression.codec", "zstd"),
            ("compression.zstd.level", "-5"),
        ]);
        assert_eq!(zstd.unwrap().compression(), Compression::Zstd { level: -5 });
        for (name, compression) in [("snappy", Compression::Snappy), ("lz4", Compression::Lz4)] {
            let config = with(&[("compression.type", name)]).unwrap();
            assert_eq!(config.compression(), compression);
        }
    }

    #[cfg(all(
        feature = "gzip",
        feature = "snappy",
        feature = "lz4",
        feature = "zstd"
    ))]
    #[test]
    fn builder_and_properties_agree() {
        use super::super::{ProducerBuilder, ProducerConfig};
        for (compression, props) in [
            (
                Compression::Gzip { level: 3 },
                &[
                    ("compression.type", "gzip"),
                    ("compression.gzip.level", "3"),
                ][..],
            ),
            (
                Compression::Zstd { level: 12 },
                &[
                    ("compression.type", "zstd"),
                    ("compression.zstd.level", "12"),
                ][..],
            ),
            (Compression::Lz4, &[("compression.type", "lz4")][..]),
        ] {
            let typed = ProducerBuilder::new()
                .bootstrap("b:9092")
                .compression(compression)
                .config()
                .unwrap();
            let by_name = ProducerConfig::from_properties(
                [("bootstrap.servers", "b:9092")]
                    .iter()
                    .chain(props)
                    .copied(),
            )
            .unwrap();
            assert_eq!(typed, by_name);
            assert_eq!(typed.compression.compression(), compression);
        }
    }

    #[cfg(not(feature = "zstd"))]
    #[test]
    fn a_codec_left_out_of_the_build_is_refused() {
        assert_eq!(
            setting_of(with(&[("compression.type", "zstd")])),
            COMPRESSION_TYPE
        );
    }

    #[test]
    fn bad_values_name_their_property() {
        for (props, setting) in [
            (&[("compression.type", "LZ4")][..], COMPRESSION_TYPE),
            (&[("compression.codec", "brotli")][..], COMPRESSION_CODEC),
            (&[("compression.gzip.level", "10")][..], GZIP_LEVEL),
            (&[("compression.gzip.level", "0")][..], GZIP_LEVEL),
            (&[("compression.lz4.level", "18")][..], LZ4_LEVEL),
            (&[("compression.zstd.level", "23")][..], ZSTD_LEVEL),
            (&[("compression.zstd.level", "high")][..], ZSTD_LEVEL),
        ] {
            assert_eq!(setting_of(with(props)), setting, "{props:?}");
        }
    }
}
