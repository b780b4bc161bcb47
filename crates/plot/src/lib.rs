//! tcpaccel-plot: small, dependency-free SVG charts for reports and the tracer.
//!
//! Three kinds, the ones flent users ask for: line/time-series charts (with
//! optional reference lines such as a target rate), empirical CDFs, and bar
//! charts with min–max whiskers over repeats (with published reference values
//! beside measured ones). Output is a self-contained SVG string; text uses the
//! viewer's sans-serif font, so no font files are needed to render.
//!
//! Every series has a colour and a dash pattern of its own, so lines that
//! overlap (two paced variants at the same rate) stay apart, in print too.
//! Where several series share a chart each also carries a few markers of a
//! shape of its own, at x positions no other series uses: a line drawn
//! exactly over another (two variants that behave the same) still shows
//! both, the upper one's dashes and the lower one's markers between them.
//! Reference values from elsewhere (published figures) are drawn in the
//! colour and dash of the series they belong to, as horizontal lines or
//! hollow markers, and labelled as such; published bars are hollow. The
//! legend sits in rows above the plot area, never over the data.
//!
//! Not a general plotting library: no interactivity, linear or log10 axes only.
//! Long series are thinned by keeping each pixel column's min and max, so a
//! 120 000-point 500 µs meter trace still shows its peaks.
#![forbid(unsafe_code)]

use std::fmt::Write;

const PALETTE: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
/// Dash patterns (SVG stroke-dasharray) paired with the palette by index:
/// series 0 solid, then dashes, dots, dash-dot. 6 patterns against 8 colours,
/// so the first 24 series differ in the (colour, dash) pair.
const DASHES: [&str; 6] = ["", "7 3", "2 2", "9 3 2 3", "4 4", "12 3 2 3 2 3"];
const MARGIN_L: f64 = 70.0;
const MARGIN_R: f64 = 20.0;
const MARGIN_T: f64 = 36.0;
const MARGIN_B: f64 = 50.0;

/// One named line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Draw as a staircase (CDFs, per-interval rates).
    pub step: bool,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, step: false }
    }
}

/// A horizontal reference line (e.g. "target 1.0 Mbit/s").
#[derive(Debug, Clone, PartialEq)]
pub struct HLine {
    pub label: String,
    pub y: f64,
    /// Draw in the colour of this series (by index); grey when `None`.
    pub series: Option<usize>,
}

/// A hollow diamond at one point (e.g. a published figure beside a measured line).
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub x: f64,
    pub y: f64,
    /// Legend text; markers with the same label share one legend entry.
    pub label: String,
    /// Draw in the colour of this series (by index); grey when `None`.
    pub series: Option<usize>,
}

/// Marker shapes paired with the series by index (SVG path of a shape of
/// about 9 px centred on 0,0): circle, square, triangle, diamond, triangle
/// down, plus. The hollow diamond of reference markers is drawn larger and
/// unfilled, so the two do not read alike.
const SHAPES: [&str; 6] = [
    "M-4,0a4,4 0 1,0 8,0a4,4 0 1,0 -8,0Z",
    "M-3.5,-3.5h7v7h-7Z",
    "M0,-4.5L4.5,3.5H-4.5Z",
    "M0,-4.5L4.5,0L0,4.5L-4.5,0Z",
    "M0,4.5L4.5,-3.5H-4.5Z",
    "M-1.5,-4.5h3v3h3v3h-3v3h-3v-3h-3v-3h3Z",
];

/// Markers per series along the x axis of a chart with several series.
const MARKS_PER_SERIES: usize = 6;

/// The marker shape of series `i`.
pub fn shape(i: usize) -> &'static str {
    SHAPES[i % SHAPES.len()]
}

/// The stroke colour and dash pattern of series `i`.
pub fn style(i: usize) -> (&'static str, &'static str) {
    (PALETTE[i % PALETTE.len()], DASHES[i % DASHES.len()])
}

fn dash_attr(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(r#" stroke-dasharray="{dash}""#)
    }
}

/// A line chart. Build with [`Chart::new`] and the builder methods.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub hlines: Vec<HLine>,
    pub markers: Vec<Marker>,
    pub x_log: bool,
    /// Force the y axis to start at zero (rates, windows).
    pub y_zero: bool,
    /// Fixed axis ranges (panels of one figure share them); data decides when `None`.
    pub x_range: Option<(f64, f64)>,
    pub y_range: Option<(f64, f64)>,
    /// Series `i` is drawn in style `i + style_offset`: a panel showing one
    /// variant keeps the colour and dash that variant has everywhere else.
    pub style_offset: usize,
    pub width: f64,
    pub height: f64,
}

impl Chart {
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            hlines: Vec::new(),
            markers: Vec::new(),
            x_log: false,
            y_zero: true,
            x_range: None,
            y_range: None,
            style_offset: 0,
            width: 720.0,
            height: 360.0,
        }
    }
    pub fn series(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }
    pub fn line(self, name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        self.series(Series::new(name, points))
    }
    pub fn hline(mut self, label: impl Into<String>, y: f64) -> Self {
        self.hlines.push(HLine { label: label.into(), y, series: None });
        self
    }
    /// A reference line in the colour and dash of series `series`.
    pub fn hline_for(mut self, series: usize, label: impl Into<String>, y: f64) -> Self {
        self.hlines.push(HLine { label: label.into(), y, series: Some(series) });
        self
    }
    /// A hollow marker at (x, y), in series `series`' colour when given.
    pub fn marker(mut self, series: Option<usize>, label: impl Into<String>, x: f64, y: f64) -> Self {
        self.markers.push(Marker { x, y, label: label.into(), series });
        self
    }
    pub fn log_x(mut self) -> Self {
        self.x_log = true;
        self
    }
    pub fn size(mut self, w: f64, h: f64) -> Self {
        self.width = w;
        self.height = h;
        self
    }
}

/// XML-escapes text for element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

fn nice_step(lo: f64, hi: f64, n: usize) -> f64 {
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag)
}

/// The axis maximum rounded up to the next nice tick, so the top gridline labels the scale.
fn nice_top(lo: f64, hi: f64, n: usize) -> f64 {
    if !lo.is_finite() || !hi.is_finite() || hi <= lo || n == 0 {
        return hi;
    }
    let step = nice_step(lo, hi, n);
    (hi / step).ceil() * step
}

/// "Nice" tick values within [lo, hi] with about `n` steps (1, 2, 5 × 10^k).
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !lo.is_finite() || !hi.is_finite() || hi <= lo || n == 0 {
        return vec![lo];
    }
    let step = nice_step(lo, hi, n);
    let start = (lo / step).ceil() * step;
    let mut t = Vec::new();
    let mut v = start;
    while v <= hi + step * 1e-9 {
        // Snap values like 0.30000000000000004 to a clean decimal.
        t.push((v / step).round() * step);
        v += step;
    }
    t
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

struct Axes {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    w: f64,
    h: f64,
    x_log: bool,
    /// Top of the plot area: below the title and the legend rows.
    top: f64,
}

impl Axes {
    fn px(&self, x: f64) -> f64 {
        let (x, a, b) =
            if self.x_log { (x.max(1e-300).log10(), self.x0, self.x1) } else { (x, self.x0, self.x1) };
        MARGIN_L + (x - a) / (b - a) * (self.w - MARGIN_L - MARGIN_R)
    }
    fn py(&self, y: f64) -> f64 {
        self.h - MARGIN_B - (y - self.y0) / (self.y1 - self.y0) * (self.h - self.top - MARGIN_B)
    }
}

fn header(svg: &mut String, w: f64, h: f64, title: &str) {
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(svg, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = write!(
        svg,
        r#"<text class="title" x="{}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        w / 2.0,
        escape(title)
    );
}

/// Keeps at most ~2 points per pixel column: the first, min and max of each column.
fn thin(points: &[(f64, f64)], ax: &Axes) -> Vec<(f64, f64)> {
    let cols = (ax.w - MARGIN_L - MARGIN_R).max(1.0) as usize;
    if points.len() <= cols * 3 {
        return points.to_vec();
    }
    let mut out = Vec::with_capacity(cols * 3);
    let mut i = 0;
    while i < points.len() {
        let col = ax.px(points[i].0).floor();
        let mut j = i;
        let (mut lo, mut hi) = (i, i);
        while j < points.len() && ax.px(points[j].0).floor() == col {
            if points[j].1 < points[lo].1 {
                lo = j;
            }
            if points[j].1 > points[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let mut idx = [i, lo, hi];
        idx.sort_unstable();
        let mut last = usize::MAX;
        for k in idx {
            if k != last {
                out.push(points[k]);
                last = k;
            }
        }
        i = j;
    }
    out
}

/// Renders a line chart to SVG.
pub fn line_chart(c: &Chart) -> String {
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite() && (!c.x_log || p.0 > 0.0);
    let all: Vec<(f64, f64)> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().filter(finite).copied())
        .chain(c.markers.iter().map(|m| (m.x, m.y)).filter(|p| finite(&p)))
        .collect();
    let (mut xmin, mut xmax) =
        all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    let (mut ymin, mut ymax) =
        all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    for h in c.hlines.iter().filter(|h| h.y.is_finite()) {
        ymin = ymin.min(h.y);
        ymax = ymax.max(h.y);
    }
    if all.is_empty() {
        (xmin, xmax) = (0.0, 1.0);
        if !ymin.is_finite() {
            (ymin, ymax) = (0.0, 1.0);
        }
    }
    if c.y_zero && ymin > 0.0 {
        ymin = 0.0;
    }
    if let Some((a, b)) = c.x_range.filter(|(a, b)| a.is_finite() && b.is_finite()) {
        (xmin, xmax) = (a, b);
    }
    if let Some((a, b)) = c.y_range.filter(|(a, b)| a.is_finite() && b.is_finite()) {
        (ymin, ymax) = (a, b);
    }
    if ymax <= ymin {
        ymax = ymin + 1.0;
    }
    ymax += (ymax - ymin) * 0.05;
    if c.x_log {
        xmin = xmin.log10().floor();
        xmax = xmax.log10().ceil();
    }
    if xmax <= xmin {
        xmax = xmin + 1.0;
    }
    let ymax = nice_top(ymin, ymax, 6);
    let yt = nice_ticks(ymin, ymax, 6);
    let marked = c.series.len() > 1;
    let mut entries: Vec<LegendEntry> = c
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| LegendEntry {
            name: s.name.clone(),
            kind: Swatch::Line(style(i + c.style_offset), marked.then(|| shape(i + c.style_offset))),
        })
        .collect();
    for m in &c.markers {
        if !entries.iter().any(|e| e.name == m.label) {
            let color = m.series.map(|i| style(i + c.style_offset).0).unwrap_or("#555");
            entries.push(LegendEntry { name: m.label.clone(), kind: Swatch::Marker(color) });
        }
    }
    let (layout, top) = legend_layout(&entries, c.width);
    let ax = Axes { x0: xmin, x1: xmax, y0: ymin, y1: ymax, w: c.width, h: c.height, x_log: c.x_log, top };
    let mut svg = String::new();
    header(&mut svg, c.width, c.height, &c.title);
    draw_axes(&mut svg, &ax, &c.x_label, &c.y_label, &yt);
    // Lines are drawn by decreasing ink (length in pixels), so a jagged
    // line that sweeps the whole plot (BBR's probing) lies under the smooth
    // ones instead of hiding them; equal lengths keep the series' order.
    let mut lines: Vec<(f64, String)> = Vec::with_capacity(c.series.len());
    for (i, s) in c.series.iter().enumerate() {
        let (color, dash) = style(i + c.style_offset);
        let pts: Vec<(f64, f64)> = s.points.iter().filter(finite).copied().collect();
        let pts = thin(&pts, &ax);
        let mut d = String::new();
        let mut prev: Option<(f64, f64)> = None;
        let mut ink = 0.0;
        for (x, y) in pts {
            let (px, py) = (ax.px(x), ax.py(y));
            if let Some((ppx, ppy)) = prev {
                ink += if s.step { (px - ppx).abs() + (py - ppy).abs() } else { (px - ppx).hypot(py - ppy) };
            }
            if let (true, Some((_, ppy))) = (s.step, prev) {
                let _ = write!(d, "{px:.1},{ppy:.1} ");
            }
            let _ = write!(d, "{px:.1},{py:.1} ");
            prev = Some((px, py));
        }
        let line = format!(
            r#"<polyline class="series" data-name="{}" fill="none" stroke="{color}" stroke-width="1.5"{} points="{}"/>"#,
            escape(&s.name),
            dash_attr(dash),
            d.trim_end()
        );
        lines.push((ink, line));
    }
    lines.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, line) in lines {
        svg.push_str(&line);
    }
    // After every line, so no later line covers an earlier one's markers.
    if marked {
        let n = c.series.len();
        for (i, s) in c.series.iter().enumerate() {
            let pts: Vec<(f64, f64)> = s.points.iter().filter(finite).copied().collect();
            let (color, _) = style(i + c.style_offset);
            for (x, y) in mark_points(&pts, i, n, s.step, (MARGIN_L, ax.w - MARGIN_R), &ax) {
                mark_at(&mut svg, shape(i + c.style_offset), color, x, y);
            }
        }
    }
    // Labels of lines at nearly the same height would print over each
    // other: each label moves up until it clears the ones already placed.
    let mut placed: Vec<f64> = Vec::new();
    for h in c.hlines.iter().filter(|h| h.y.is_finite()) {
        let y = ax.py(h.y);
        let (color, dash) = match h.series {
            Some(i) => {
                let (color, dash) = style(i + c.style_offset);
                (color, if dash.is_empty() { "6 4" } else { dash })
            }
            None => ("#555", "6 4"),
        };
        let mut ly = y - 4.0;
        while placed.iter().any(|p| (p - ly).abs() < 13.0) {
            ly -= 13.0;
        }
        placed.push(ly);
        let _ = write!(
            svg,
            r##"<line class="hline" x1="{MARGIN_L}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="{color}" stroke-width="1.5" stroke-dasharray="{dash}" stroke-opacity="0.8"/><text class="hline-label" x="{}" y="{ly:.1}" fill="{color}" stroke="white" stroke-width="3" paint-order="stroke">{}</text>"##,
            c.width - MARGIN_R,
            MARGIN_L + 6.0,
            escape(&h.label)
        );
    }
    for m in c.markers.iter().filter(|m| finite(&&(m.x, m.y))) {
        let (px, py) = (ax.px(m.x), ax.py(m.y));
        let color = m.series.map(|i| style(i + c.style_offset).0).unwrap_or("#555");
        let _ = write!(
            svg,
            r#"<path class="marker" data-label="{}" d="M{px:.1},{:.1} L{:.1},{py:.1} L{px:.1},{:.1} L{:.1},{py:.1} Z" fill="white" stroke="{color}" stroke-width="2"/>"#,
            escape(&m.label),
            py - 6.0,
            px + 6.0,
            py + 6.0,
            px - 6.0
        );
    }
    legend(&mut svg, &entries, &layout);
    svg.push_str("</svg>\n");
    svg
}

/// Where series `i` of `n` puts its markers, in pixels: [`MARKS_PER_SERIES`]
/// columns evenly spread over the plot's width, series `i` shifted by
/// `i / n` of a column, so no two series mark the same x. The y is the
/// line's at that x (a staircase's last step before it); none outside the
/// series' own x span.
fn mark_points(
    pts: &[(f64, f64)],
    i: usize,
    n: usize,
    step: bool,
    (left, right): (f64, f64),
    ax: &Axes,
) -> Vec<(f64, f64)> {
    let px: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (ax.px(x), ax.py(y))).collect();
    let (Some(first), Some(last)) = (px.first(), px.last()) else { return Vec::new() };
    let column = (right - left) / MARKS_PER_SERIES as f64;
    (0..MARKS_PER_SERIES)
        .filter_map(|k| {
            let x = left + column * (k as f64 + (i as f64 + 0.5) / n as f64);
            if x < first.0 || x > last.0 {
                return None;
            }
            let at = px.partition_point(|p| p.0 <= x);
            let (a, b) = (px[at.saturating_sub(1)], px[at.min(px.len() - 1)]);
            let y = if step || b.0 <= a.0 { a.1 } else { a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0) };
            y.is_finite().then_some((x, y))
        })
        .collect()
}

/// One marker of shape `d` at (x, y), filled in the series' colour with a
/// white edge that sets it off from the lines under it.
fn mark_at(svg: &mut String, d: &str, color: &str, x: f64, y: f64) {
    let _ = write!(
        svg,
        r#"<path class="series-marker" transform="translate({x:.1},{y:.1})" d="{d}" fill="{color}" stroke="white" stroke-width="1"/>"#
    );
}

/// The plot frame, the horizontal grid lines at `yt` with their labels, and
/// the y axis title: what both chart kinds draw first.
fn draw_frame_and_y(svg: &mut String, ax: &Axes, yl: &str, yt: &[f64]) {
    let (l, r, t, b) = (MARGIN_L, ax.w - MARGIN_R, ax.top, ax.h - MARGIN_B);
    let _ = write!(
        svg,
        r##"<rect x="{l}" y="{t}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
        r - l,
        b - t
    );
    for v in yt {
        let y = ax.py(*v);
        let _ = write!(
            svg,
            r##"<line x1="{l}" x2="{r}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            l - 6.0,
            y + 4.0,
            fmt_tick(*v)
        );
    }
    let _ = write!(
        svg,
        r#"<text class="ylabel" transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (t + b) / 2.0,
        escape(yl)
    );
}

fn draw_axes(svg: &mut String, ax: &Axes, xl: &str, yl: &str, yt: &[f64]) {
    draw_frame_and_y(svg, ax, yl, yt);
    let (l, r, t, b) = (MARGIN_L, ax.w - MARGIN_R, ax.top, ax.h - MARGIN_B);
    let xt: Vec<(f64, String)> = if ax.x_log {
        ((ax.x0 as i32)..=(ax.x1 as i32)).map(|e| (10f64.powi(e), fmt_tick(10f64.powi(e)))).collect()
    } else {
        nice_ticks(ax.x0, ax.x1, 8).into_iter().map(|v| (v, fmt_tick(v))).collect()
    };
    for (v, label) in xt {
        let x = ax.px(v);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{t}" y2="{b}" stroke="#eee"/><text x="{x:.1}" y="{}" text-anchor="middle">{label}</text>"##,
            b + 16.0
        );
    }
    let _ = write!(
        svg,
        r#"<text class="xlabel" x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (l + r) / 2.0,
        ax.h - 12.0,
        escape(xl)
    );
}

/// What a legend entry shows beside its text.
enum Swatch {
    /// A short stroke in the series' colour and dash, with its marker
    /// shape when the chart draws markers.
    Line((&'static str, &'static str), Option<&'static str>),
    /// A hollow diamond (reference markers).
    Marker(&'static str),
    /// A filled box (measured bars).
    Fill(&'static str),
    /// A hollow dashed box (published bars).
    Hollow(&'static str),
}

struct LegendEntry {
    name: String,
    kind: Swatch,
}

/// Where each legend entry goes: rows above the plot area, left to right,
/// wrapping at the frame's width, so the legend never covers data.
/// Returns the entries' (x, baseline y) and the top of the plot area.
fn legend_layout(entries: &[LegendEntry], w: f64) -> (Vec<(f64, f64)>, f64) {
    const ROW: f64 = 16.0;
    const FIRST: f64 = 40.0;
    let mut out = Vec::with_capacity(entries.len());
    let (mut x, mut y) = (MARGIN_L, FIRST);
    for e in entries {
        // About 7 px per character at font-size 12, the swatch and a gap.
        let width = 32.0 + e.name.chars().count() as f64 * 7.0 + 16.0;
        if x > MARGIN_L && x + width > w - MARGIN_R {
            x = MARGIN_L;
            y += ROW;
        }
        out.push((x, y));
        x += width;
    }
    let top = if entries.is_empty() { MARGIN_T } else { y + 10.0 };
    (out, top)
}

fn legend(svg: &mut String, entries: &[LegendEntry], layout: &[(f64, f64)]) {
    for (e, &(x, y)) in entries.iter().zip(layout) {
        match e.kind {
            Swatch::Line((color, dash), mark) => {
                let _ = write!(
                    svg,
                    r#"<line x1="{x}" x2="{}" y1="{}" y2="{}" stroke="{color}" stroke-width="2"{}/>"#,
                    x + 26.0,
                    y - 4.0,
                    y - 4.0,
                    dash_attr(dash)
                );
                if let Some(d) = mark {
                    mark_at(svg, d, color, x + 13.0, y - 4.0);
                }
            }
            Swatch::Marker(color) => {
                let (cx, cy) = (x + 13.0, y - 4.0);
                let _ = write!(
                    svg,
                    r#"<path d="M{cx},{} L{},{cy} L{cx},{} L{},{cy} Z" fill="white" stroke="{color}" stroke-width="2"/>"#,
                    cy - 5.0,
                    cx + 5.0,
                    cy + 5.0,
                    cx - 5.0
                );
            }
            Swatch::Fill(color) => {
                let _ =
                    write!(svg, r#"<rect x="{x}" y="{}" width="26" height="9" fill="{color}"/>"#, y - 9.0);
            }
            Swatch::Hollow(color) => {
                let _ = write!(
                    svg,
                    r#"<rect x="{}" y="{}" width="25" height="8" fill="white" stroke="{color}" stroke-width="2" stroke-dasharray="4 2"/>"#,
                    x + 0.5,
                    y - 8.5
                );
            }
        }
        let _ = write!(svg, r#"<text class="legend" x="{}" y="{y}">{}</text>"#, x + 32.0, escape(&e.name));
    }
}

/// Empirical CDF chart of several samples (e.g. flow completion times per variant).
pub fn cdf_chart(title: &str, x_label: &str, samples: &[(String, Vec<f64>)], log_x: bool) -> String {
    let mut c = Chart::new(title, x_label, "fraction ≤ x");
    c.x_log = log_x;
    for (name, v) in samples {
        let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len() as f64;
        let pts = v.iter().enumerate().map(|(i, x)| (*x, (i + 1) as f64 / n)).collect();
        c.series.push(Series { name: name.clone(), points: pts, step: true });
    }
    line_chart(&c)
}

/// One bar: a measured median with min–max whiskers, or a published reference value.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The x group (e.g. a variant such as "static").
    pub group: String,
    /// The series within a group (e.g. "measured", "published").
    pub label: String,
    pub value: f64,
    /// Whiskers; `None` for a single value (e.g. a published figure).
    pub range: Option<(f64, f64)>,
    /// A reference value from elsewhere (a published figure): drawn hollow with
    /// a dashed outline, its value printed above it.
    pub reference: bool,
}

/// Renders grouped bars with whiskers. Groups keep their first-seen order.
pub fn bar_chart(title: &str, y_label: &str, bars: &[Bar]) -> String {
    let mut groups: Vec<&str> = Vec::new();
    let mut labels: Vec<&str> = Vec::new();
    for b in bars {
        if !groups.contains(&b.group.as_str()) {
            groups.push(&b.group);
        }
        if !labels.contains(&b.label.as_str()) {
            labels.push(&b.label);
        }
    }
    let ymax = bars
        .iter()
        .map(|b| b.range.map(|r| r.1).unwrap_or(b.value).max(b.value))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let ymax = if ymax <= 0.0 { 1.0 } else { ymax * 1.08 };
    let ymax = nice_top(0.0, ymax, 6);
    let yt = nice_ticks(0.0, ymax, 6);
    let (w, h) = (720.0, 360.0);
    let entries: Vec<LegendEntry> = labels
        .iter()
        .enumerate()
        .map(|(li, l)| {
            let color = PALETTE[li % PALETTE.len()];
            let reference = bars.iter().any(|b| b.label == *l && b.reference);
            LegendEntry {
                name: l.to_string(),
                kind: if reference { Swatch::Hollow(color) } else { Swatch::Fill(color) },
            }
        })
        .collect();
    let (layout, top) = legend_layout(&entries, w);
    let ax = Axes { x0: 0.0, x1: 1.0, y0: 0.0, y1: ymax, w, h, x_log: false, top };
    let mut svg = String::new();
    header(&mut svg, w, h, title);
    draw_frame_and_y(&mut svg, &ax, y_label, &yt);
    let (l, r, b) = (MARGIN_L, w - MARGIN_R, h - MARGIN_B);
    let gw = (r - l) / groups.len().max(1) as f64;
    let bw = gw * 0.8 / labels.len().max(1) as f64;
    for (gi, g) in groups.iter().enumerate() {
        let gx = l + gi as f64 * gw;
        let _ = write!(
            svg,
            r#"<text class="group" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            gx + gw / 2.0,
            b + 16.0,
            escape(g)
        );
        for bar in bars.iter().filter(|x| x.group == *g) {
            let li = labels.iter().position(|x| *x == bar.label).unwrap_or(0);
            let color = PALETTE[li % PALETTE.len()];
            let x = gx + gw * 0.1 + li as f64 * bw;
            let v = if bar.value.is_finite() { bar.value.max(0.0) } else { 0.0 };
            let y = ax.py(v);
            let paint = if bar.reference {
                format!(r#"fill="white" stroke="{color}" stroke-width="2" stroke-dasharray="5 3""#)
            } else {
                format!(r#"fill="{color}""#)
            };
            let _ = write!(
                svg,
                r#"<rect class="bar" data-group="{}" data-label="{}" data-value="{v}" x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" {paint}/>"#,
                escape(&bar.group),
                escape(&bar.label),
                bw * 0.9,
                (b - y).max(0.0)
            );
            if bar.reference {
                let _ = write!(
                    svg,
                    r#"<text class="bar-value" x="{:.1}" y="{:.1}" text-anchor="middle" fill="{color}">{}</text>"#,
                    x + bw * 0.45,
                    y - 4.0,
                    fmt_tick(v)
                );
            }
            if let Some((lo, hi)) = bar.range {
                let cx = x + bw * 0.45;
                let (ylo, yhi) = (ax.py(lo.max(0.0)), ax.py(hi.max(0.0)));
                let _ = write!(
                    svg,
                    r##"<g class="whisker" stroke="#000"><line x1="{cx:.1}" x2="{cx:.1}" y1="{ylo:.1}" y2="{yhi:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{ylo:.1}" y2="{ylo:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{yhi:.1}" y2="{yhi:.1}"/></g>"##,
                    cx - 4.0,
                    cx + 4.0,
                    cx - 4.0,
                    cx + 4.0
                );
            }
        }
    }
    legend(&mut svg, &entries, &layout);
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(h: &str, n: &str) -> usize {
        h.matches(n).count()
    }

    #[test]
    fn line_chart_has_series_labels_and_reference() {
        let c = Chart::new("Goodput <A&B>", "time [s]", "Mbit/s")
            .line("static", vec![(0.0, 1.0), (1.0, 450.0), (2.0, 460.0)])
            .line("none", vec![(0.0, 1.0), (1.0, 200.0)])
            .hline("bottleneck 470", 470.0);
        let s = line_chart(&c);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(count(&s, r#"class="series""#), 2);
        assert!(s.contains(r#"data-name="static""#) && s.contains(r#"data-name="none""#));
        assert!(s.contains(">time [s]</text>") && s.contains(">Mbit/s</text>"));
        assert!(s.contains("Goodput &lt;A&amp;B&gt;"));
        assert_eq!(count(&s, r#"class="hline""#), 1);
        // The y axis covers the reference line: some tick at or above 470.
        assert!(s.contains(">500</text>"), "{s}");
    }

    #[test]
    fn empty_and_degenerate_inputs_render() {
        let s = line_chart(&Chart::new("empty", "x", "y"));
        assert!(s.contains("</svg>"));
        let s = line_chart(
            &Chart::new("flat", "x", "y").line("c", vec![(1.0, 5.0), (1.0, 5.0), (f64::NAN, 1.0)]),
        );
        assert!(!s.contains("NaN"));
    }

    #[test]
    fn thinning_keeps_peaks() {
        let mut pts: Vec<(f64, f64)> = (0..120_000).map(|i| (i as f64 * 0.0005, 1.0)).collect();
        pts[60_000].1 = 99.0;
        let s = line_chart(&Chart::new("t", "s", "v").line("m", pts));
        let poly = s.split(r#"points=""#).nth(1).unwrap();
        let n = poly.split('"').next().unwrap().split(' ').count();
        assert!(n < 5000, "{n} points");
        // The spike's y pixel (top of plot area, value 99 of max ~99) survives.
        let ys: Vec<f64> = poly
            .split('"')
            .next()
            .unwrap()
            .split(' ')
            .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
            .collect();
        let top = ys.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(top < 100.0, "spike lost, top y = {top}");
    }

    #[test]
    fn cdf_is_monotone_staircase() {
        let s = cdf_chart("FCT", "ms", &[("lanes".into(), vec![3.0, 1.0, 2.0])], false);
        assert!(s.contains("fraction ≤ x"));
        assert_eq!(count(&s, r#"class="series""#), 1);
        let s = cdf_chart("FCT", "ms", &[("a".into(), vec![0.1, 10.0, 1000.0])], true);
        assert!(s.contains(">1000</text>") || s.contains(">1.0e3</text>"), "{s}");
    }

    #[test]
    fn bars_with_whiskers_and_published() {
        let bars = vec![
            Bar {
                group: "none".into(),
                label: "measured".into(),
                value: 210.0,
                range: Some((190.0, 230.0)),
                reference: false,
            },
            Bar {
                group: "none".into(),
                label: "published".into(),
                value: 200.0,
                range: None,
                reference: true,
            },
            Bar {
                group: "static".into(),
                label: "measured".into(),
                value: 455.0,
                range: Some((450.0, 460.0)),
                reference: false,
            },
        ];
        let s = bar_chart("Goodput", "Mbit/s", &bars);
        assert_eq!(count(&s, r#"class="bar""#), 3);
        assert_eq!(count(&s, r#"class="whisker""#), 2);
        assert!(s.contains(r#"data-group="static""#) && s.contains(">published</text>"));
        // The published bar is hollow and dashed with its value above; measured bars are filled.
        let published = s.split(r#"data-label="published""#).nth(1).unwrap().split("/>").next().unwrap();
        assert!(
            published.contains(r#"fill="white""#) && published.contains("stroke-dasharray"),
            "{published}"
        );
        let measured = s.split(r#"data-label="measured""#).nth(1).unwrap().split("/>").next().unwrap();
        assert!(!measured.contains(r#"fill="white""#), "{measured}");
        assert!(s.contains(r#"class="bar-value""#) && s.contains(">200</text>"));
    }

    /// Attributes of the `n`th element whose text starts with `tag`.
    fn nth_element<'a>(s: &'a str, tag: &str, n: usize) -> &'a str {
        s.split(tag).nth(n + 1).unwrap().split("/>").next().unwrap()
    }

    #[test]
    /// Issue 51 item 8: two variants that behave the same draw one line
    /// over the other; each still shows its own markers, at x positions of
    /// its own, drawn after every line, and its legend swatch carries them.
    fn coincident_lines_both_stay_visible() {
        let same: Vec<(f64, f64)> = (0..=100).map(|x| (x as f64, (x % 7) as f64)).collect();
        let c = Chart::new("t", "x", "y").line("defaults", same.clone()).line("bdp-buffers", same);
        let s = line_chart(&c);
        let marks = |i: usize| -> Vec<f64> {
            s.match_indices(&format!(r#"d="{}""#, shape(i)))
                .map(|(at, _)| {
                    let head = &s[..at];
                    let t = head.rsplit("translate(").next().unwrap();
                    t.split(',').next().unwrap().parse().unwrap()
                })
                .collect()
        };
        // Each series: its markers on the plot plus one in the legend.
        let (a, b) = (marks(0), marks(1));
        assert_eq!(a.len(), MARKS_PER_SERIES + 1, "{s}");
        assert_eq!(b.len(), MARKS_PER_SERIES + 1, "{s}");
        assert!(a.iter().all(|x| !b.contains(x)), "same x: {a:?} {b:?}");
        let last_line = s.rfind("<polyline").unwrap();
        assert!(s.find("series-marker").unwrap() > last_line, "a line drawn over the markers");
        // A jagged line is drawn under a smooth one listed after it.
        let jagged: Vec<(f64, f64)> =
            (0..=100).map(|x| (x as f64, if x % 2 == 0 { 0.0 } else { 9.0 })).collect();
        let c = Chart::new("t", "x", "y").line("bbr", jagged).line("paced", vec![(0.0, 5.0), (100.0, 5.0)]);
        let s = line_chart(&c);
        assert!(s.find(r#"data-name="bbr""#).unwrap() < s.find(r#"data-name="paced""#).unwrap());
        let c = Chart::new("t", "x", "y")
            .line("paced", vec![(0.0, 5.0), (100.0, 5.0)])
            .line("bbr", (0..=100).map(|x| (x as f64, if x % 2 == 0 { 0.0 } else { 9.0 })).collect());
        let s = line_chart(&c);
        assert!(s.find(r#"data-name="bbr""#).unwrap() < s.find(r#"data-name="paced""#).unwrap());
        // One series alone needs none.
        let one = line_chart(&Chart::new("t", "x", "y").line("a", vec![(0.0, 1.0), (1.0, 2.0)]));
        assert!(!one.contains("series-marker"));
    }

    #[test]
    fn series_differ_in_colour_and_dash() {
        let mut c = Chart::new("t", "x", "y");
        for i in 0..6 {
            c = c.line(format!("s{i}"), vec![(0.0, 1.0), (1.0, 1.0)]);
        }
        let s = line_chart(&c);
        let mut seen = Vec::new();
        for i in 0..6 {
            let e = nth_element(&s, "<polyline", i);
            let color = e.split(r#"stroke=""#).nth(1).unwrap().split('"').next().unwrap();
            let dash =
                e.split(r#"stroke-dasharray=""#).nth(1).map(|d| d.split('"').next().unwrap()).unwrap_or("");
            assert!(!seen.iter().any(|(c, _)| *c == color), "colour {color} repeats");
            assert!(!seen.iter().any(|(_, d)| *d == dash), "dash {dash:?} repeats");
            seen.push((color, dash));
        }
        // The legend draws each swatch with the same dash as its line.
        for (_, dash) in seen.iter().filter(|(_, d)| !d.is_empty()) {
            assert_eq!(s.matches(&format!(r#"stroke-dasharray="{dash}""#)).count(), 2, "{dash}");
        }
    }

    #[test]
    fn reference_lines_and_markers_take_their_series_style() {
        let c = Chart::new("t", "x", "y")
            .line("a", vec![(0.0, 1.0), (1.0, 2.0)])
            .line("b", vec![(0.0, 1.0), (1.0, 3.0)])
            .hline_for(1, "published b 5", 5.0)
            .hline_for(0, "published a 5", 5.0)
            .marker(Some(1), "published (b)", 0.5, 9.0)
            .marker(Some(1), "published (b)", 0.7, 8.0);
        let s = line_chart(&c);
        let (b_color, b_dash) = style(1);
        let first = nth_element(&s, r#"<line class="hline""#, 0);
        assert!(first.contains(b_color) && first.contains(b_dash), "{first}");
        // Two labels at the same height do not overlap.
        let ys: Vec<f64> = s
            .split(r#"class="hline-label""#)
            .skip(1)
            .map(|t| t.split(r#"y=""#).nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(ys.len(), 2);
        assert!((ys[0] - ys[1]).abs() >= 13.0, "{ys:?}");
        // Both markers drawn, one legend entry, the y axis covers the marker at 9.
        assert_eq!(count(&s, r#"class="marker""#), 2);
        assert_eq!(count(&s, ">published (b)</text>"), 1);
        assert!(s.contains(">10</text>") || s.contains(">9</text>"), "{s}");
    }

    #[test]
    fn legend_rows_sit_above_the_plot_area() {
        let mut c = Chart::new("t", "x", "y");
        for i in 0..8 {
            c = c.line(format!("a fairly long variant name {i}"), vec![(0.0, 100.0), (1.0, 100.0)]);
        }
        let s = line_chart(&c);
        let frame_top: f64 = s
            .split(r##"fill="none" stroke="#333""##)
            .next()
            .unwrap()
            .rsplit(r#"y=""#)
            .next()
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let ys: Vec<f64> = s
            .split(r#"class="legend""#)
            .skip(1)
            .map(|t| t.split(r#"y=""#).nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(ys.len(), 8);
        assert!(ys.iter().all(|y| *y < frame_top), "legend {ys:?} below the frame top {frame_top}");
        // Eight long names do not fit one 720 px row: they wrap.
        assert!(ys.iter().any(|y| *y > ys[0]), "{ys:?}");
    }

    #[test]
    fn ticks_are_nice() {
        assert_eq!(nice_ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = nice_ticks(0.0, 1.0, 5);
        let want = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0];
        assert_eq!(t.len(), want.len());
        assert!(t.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{t:?}");
        assert_eq!(fmt_tick(t[3]), "0.6");
    }
}
