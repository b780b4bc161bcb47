//! The emulator's 500 µs meter as the scenarios read it back: the a→b rows
//! of `<link>.csv` in a run's meter directory ([`parse_bins`]).

use anyhow::{Context, Result};

/// One h1→h2 meter bin (the columns the pacing scenarios read).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeterBin {
    pub start_s: f64,
    pub width_s: f64,
    pub arrived_frames: u64,
    pub arrived_bytes: u64,
    pub dropped_frames: u64,
}

/// Parses the a→b rows of the emulator's meter CSV.
pub fn parse_bins(text: &str) -> Result<Vec<MeterBin>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col =
        |name: &str| header.iter().position(|h| *h == name).with_context(|| format!("meter column {name}"));
    let c = [
        col("dir")?,
        col("start_s")?,
        col("width_s")?,
        col("arrived_frames")?,
        col("arrived_bytes")?,
        col("dropped_frames")?,
    ];
    let mut out = Vec::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f.get(c[0]) != Some(&"a_to_b") {
            continue;
        }
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        out.push(MeterBin {
            start_s: num(c[1]),
            width_s: num(c[2]),
            arrived_frames: num(c[3]) as u64,
            arrived_bytes: num(c[4]) as u64,
            dropped_frames: num(c[5]) as u64,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_csv_rows_of_the_forward_direction() {
        let csv = "dir,start_s,width_s,arrived_frames,arrived_bytes,departed_frames,departed_bytes,dropped_frames\n\
                   a_to_b,0.0,0.0005,3,4542,3,4542,1\nb_to_a,0.0,0.0005,9,600,9,600,0\n";
        let b = parse_bins(csv).unwrap();
        assert_eq!(
            b,
            vec![MeterBin {
                start_s: 0.0,
                width_s: 0.0005,
                arrived_frames: 3,
                arrived_bytes: 4542,
                dropped_frames: 1
            }]
        );
        assert!(parse_bins("dir,start_s\n").is_err());
    }
}
