//! Text of the plots: the bundled DejaVu Sans, laid out and rasterised with ab_glyph.
//!
//! plotters 0.3.7 draws ab_glyph text with each glyph's ink box at the pen position, which
//! drops the glyph's left side bearing: narrow glyphs with wide bearings ("1", ".") leave a
//! gap after them ("step 1 5, L = 0. 0075"). Here a glyph's ink sits at pen + bearing, pens
//! advance by the font's advances and kerning at sub-pixel precision, and [`Canvas`] routes
//! every text plotters draws (tick labels, captions, legends) through this path.
//!
//! Sizes follow plotters' convention: `size` px is the line height ascent − descent (an em is
//! `size / 1.164` px for DejaVu Sans).

use ab_glyph::{point, Font, FontRef, Glyph, PxScale, ScaleFont};
use plotters::prelude::{BitMapBackend, DrawingBackend};
use plotters_backend::{
    text_anchor::{HPos, VPos},
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};
use std::sync::OnceLock;

/// DejaVu Sans 2.37 (Bitstream Vera licence, see `assets/fonts/DejaVuSans-LICENSE.txt`).
pub(super) static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The bundled font, parsed once (`None` only if the bundled bytes were not a font).
pub(super) fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(FONT_BYTES).ok())
        .as_ref()
}

/// One line of text laid out at a size: glyphs positioned in a box whose top-left corner is
/// the origin, with the baseline at `ascent`.
pub(super) struct Line {
    glyphs: Vec<Glyph>,
    /// The pen advance of the whole line (px).
    pub width: f32,
    /// ascent − descent (px): the height of the line box.
    pub height: f32,
}

/// A subscript's size relative to the text, and how far its baseline drops (in text sizes).
const SUBSCRIPT: (f32, f32) = (0.7, 0.22);

/// The characters of `text` with whether each is a subscript: `_x` sets the one character
/// `x` as a subscript and `_{…}` the group (so `ρ_μ` reads ρ with a lowered μ, and
/// `S_{ε,1}` S with a lowered `ε,1`); `\_` is an underscore, as is a trailing `_`.
pub(super) fn subscripts(text: &str) -> Vec<(char, bool)> {
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            ('\\', Some('_')) => {
                chars.next();
                out.push(('_', false));
            }
            ('_', Some('{')) => {
                chars.next();
                for g in chars.by_ref().take_while(|&g| g != '}') {
                    out.push((g, true));
                }
            }
            ('_', Some(x)) => {
                chars.next();
                out.push((x, true));
            }
            (c, _) => out.push((c, false)),
        }
    }
    out
}

/// Lay out `text` at `size` px: advances, kerning between neighbours, sub-pixel pens;
/// subscripts (`_x`, `_{…}`: [`subscripts`]) smaller and lowered. Control characters are
/// skipped; characters the font lacks get its missing-glyph box.
pub(super) fn layout(text: &str, size: f32) -> Line {
    let Some(font) = font() else {
        return Line {
            glyphs: Vec::new(),
            width: 0.0,
            height: size,
        };
    };
    let scaled = font.as_scaled(PxScale::from(size));
    let small = font.as_scaled(PxScale::from(size * SUBSCRIPT.0));
    let ascent = scaled.ascent();
    let mut glyphs = Vec::with_capacity(text.len());
    let mut pen = 0f32;
    let mut prev = None;
    for (c, sub) in subscripts(text)
        .into_iter()
        .filter(|(c, _)| !c.is_control())
    {
        let (face, glyph_size, baseline) = if sub {
            (&small, size * SUBSCRIPT.0, ascent + size * SUBSCRIPT.1)
        } else {
            (&scaled, size, ascent)
        };
        let id = face.glyph_id(c);
        if let Some((p, was_sub)) = prev {
            if was_sub == sub {
                pen += face.kern(p, id);
            }
        }
        glyphs.push(id.with_scale_and_position(glyph_size, point(pen, baseline)));
        pen += face.h_advance(id);
        prev = Some((id, sub));
    }
    Line {
        glyphs,
        width: pen,
        height: ascent - scaled.descent(),
    }
}

/// The advance width of `text` at `size` px.
pub(super) fn width(text: &str, size: f64) -> f64 {
    layout(text, size as f32).width as f64
}

/// Anti-aliased coverage of a line: `alpha[y·w + x] ∈ [0, 1]` for the pixel at
/// `(x0 + x, y0 + y)` in the line box's coordinates (ink can reach slightly outside the box).
pub(super) struct Coverage {
    pub x0: i32,
    pub y0: i32,
    pub w: usize,
    pub h: usize,
    pub alpha: Vec<f32>,
}

/// Rasterise a laid-out line; overlapping glyphs combine as `1 − (1 − a)(1 − b)`.
pub(super) fn rasterise(line: &Line) -> Coverage {
    let outlines: Vec<_> = match font() {
        Some(font) => line
            .glyphs
            .iter()
            .filter_map(|g| font.outline_glyph(g.clone()))
            .collect(),
        None => Vec::new(),
    };
    if outlines.is_empty() {
        return Coverage {
            x0: 0,
            y0: 0,
            w: 0,
            h: 0,
            alpha: Vec::new(),
        };
    }
    let (mut x0, mut y0, mut x1, mut y1) = (i32::MAX, i32::MAX, i32::MIN, i32::MIN);
    for o in &outlines {
        let b = o.px_bounds();
        x0 = x0.min(b.min.x.floor() as i32);
        y0 = y0.min(b.min.y.floor() as i32);
        x1 = x1.max(b.max.x.ceil() as i32);
        y1 = y1.max(b.max.y.ceil() as i32);
    }
    let (w, h) = ((x1 - x0).max(0) as usize, (y1 - y0).max(0) as usize);
    let mut alpha = vec![0f32; w * h];
    for o in &outlines {
        let b = o.px_bounds();
        let (bx, by) = (b.min.x as i32 - x0, b.min.y as i32 - y0);
        o.draw(|x, y, c| {
            let (px, py) = (bx + x as i32, by + y as i32);
            if px >= 0 && py >= 0 && (px as usize) < w && (py as usize) < h {
                let a = &mut alpha[py as usize * w + px as usize];
                *a = 1.0 - (1.0 - *a) * (1.0 - c.clamp(0.0, 1.0));
            }
        });
    }
    Coverage {
        x0,
        y0,
        w,
        h,
        alpha,
    }
}

/// plotters' bitmap backend with text drawn by [`layout`] and [`rasterise`]; every other
/// primitive is the bitmap backend's own.
pub(super) struct Canvas<'a>(pub BitMapBackend<'a>);

type BackendResult<E> = Result<(), DrawingErrorKind<E>>;

impl<'a> DrawingBackend for Canvas<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }
    fn ensure_prepared(&mut self) -> BackendResult<Self::ErrorType> {
        self.0.ensure_prepared()
    }
    fn present(&mut self) -> BackendResult<Self::ErrorType> {
        self.0.present()
    }
    fn draw_pixel(&mut self, p: BackendCoord, c: BackendColor) -> BackendResult<Self::ErrorType> {
        self.0.draw_pixel(p, c)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> BackendResult<Self::ErrorType> {
        self.0.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        style: &S,
        fill: bool,
    ) -> BackendResult<Self::ErrorType> {
        self.0.draw_rect(a, b, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> BackendResult<Self::ErrorType> {
        self.0.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        centre: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> BackendResult<Self::ErrorType> {
        self.0.draw_circle(centre, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vertices: I,
        style: &S,
    ) -> BackendResult<Self::ErrorType> {
        self.0.fill_polygon(vertices, style)
    }
    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        (w, h): (u32, u32),
        src: &[u8],
    ) -> BackendResult<Self::ErrorType> {
        self.0.blit_bitmap(pos, (w, h), src)
    }

    /// The line box (advance width × ascent − descent) of `text`, unrotated.
    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let line = layout(text, style.size() as f32);
        Ok((line.width.ceil() as u32, line.height.ceil() as u32))
    }

    /// `text` anchored at `pos` by its line box (anchor and rotation as plotters defines
    /// them), each pixel blended once with its coverage.
    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> BackendResult<Self::ErrorType> {
        let colour = style.color();
        if colour.alpha == 0.0 {
            return Ok(());
        }
        let line = layout(text, style.size() as f32);
        let (w, h) = (line.width.round() as i32, line.height.round() as i32);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Center => -w / 2,
            HPos::Right => -w,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -h / 2,
            VPos::Bottom => -h,
        };
        let transform = style.transform();
        let cov = rasterise(&line);
        for y in 0..cov.h {
            for x in 0..cov.w {
                let a = cov.alpha[y * cov.w + x];
                if a <= 0.0 {
                    continue;
                }
                let (tx, ty) = transform.transform(cov.x0 + x as i32 + dx, cov.y0 + y as i32 + dy);
                let c = BackendColor {
                    alpha: colour.alpha * a as f64,
                    rgb: colour.rgb,
                };
                self.0.draw_pixel((pos.0 + tx, pos.1 + ty), c)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leftmost column with ink of a rasterised line, in line-box coordinates.
    fn ink_left(cov: &Coverage) -> Option<i32> {
        (0..cov.w)
            .find(|&x| (0..cov.h).any(|y| cov.alpha[y * cov.w + x] > 0.3))
            .map(|x| cov.x0 + x as i32)
    }

    #[test]
    fn underscores_set_subscripts() {
        let subs = |t: &str| -> Vec<(char, bool)> { subscripts(t) };
        assert_eq!(subs("ρ_μ"), vec![('ρ', false), ('μ', true)]);
        assert_eq!(
            subs("S_{ε,1}x"),
            vec![
                ('S', false),
                ('ε', true),
                (',', true),
                ('1', true),
                ('x', false)
            ]
        );
        assert_eq!(
            subs("a\\_b"),
            vec![('a', false), ('_', false), ('b', false)]
        );
        assert_eq!(
            subs("end_"),
            vec![('e', false), ('n', false), ('d', false), ('_', false)]
        );
        // "S_ε": two glyphs (no underscore drawn), the ε smaller, lower and after the S;
        // its ink reaches below the baseline further than a full-size ε does.
        let size = 40.0f32;
        let line = layout("S_ε", size);
        assert_eq!(line.glyphs.len(), 2);
        let (s_, e) = (&line.glyphs[0], &line.glyphs[1]);
        assert!(
            e.scale.y < s_.scale.y && e.position.y > s_.position.y && e.position.x > s_.position.x
        );
        let bottom = |cov: &Coverage| cov.y0 + cov.h as i32;
        assert!(bottom(&rasterise(&line)) > bottom(&rasterise(&layout("Sε", size))));
        assert!(layout("S_ε", size).width < layout("S\\_ε", size).width);
    }

    #[test]
    fn a_glyph_starts_at_its_left_side_bearing() {
        // plotters' own path put every glyph's ink at the pen (bearing dropped): "1" and "."
        // have wide bearings in DejaVu Sans (about 0.11 em and 0.11 em).
        let font = font().expect("the bundled font parses");
        let size = 60.0f32;
        let scaled = font.as_scaled(PxScale::from(size));
        for c in ['1', '.', '0', '5', 'T', 'j'] {
            let bearing = scaled.h_side_bearing(scaled.glyph_id(c));
            let left = ink_left(&rasterise(&layout(&c.to_string(), size))).unwrap();
            assert!(
                (left as f32 - bearing).abs() <= 1.0,
                "{c:?}: ink starts at {left} px, the font's bearing is {bearing:.2} px"
            );
        }
    }

    #[test]
    fn glyphs_follow_the_advances() {
        // In "1.5" the "5" starts at advance("1") + advance(".") + its own bearing (no kerning
        // between these glyphs in DejaVu Sans): the spacing the font designs, not the ink widths.
        let font = font().unwrap();
        let size = 48.0f32;
        let s = font.as_scaled(PxScale::from(size));
        let id = |c| s.glyph_id(c);
        let expected = s.h_advance(id('1')) + s.h_advance(id('.')) + s.h_side_bearing(id('5'));
        let line = layout("1.5", size);
        let five = rasterise(&layout("5", size));
        let all = rasterise(&line);
        // The "5" is the rightmost glyph: its ink's leftmost column, searched from the right
        // half of the string onwards, is where it starts.
        let from = (s.h_advance(id('1')) + s.h_advance(id('.'))).floor() as i32 - all.x0;
        let start = (from.max(0) as usize..all.w)
            .find(|&x| (0..all.h).any(|y| all.alpha[y * all.w + x] > 0.3))
            .map(|x| all.x0 + x as i32)
            .unwrap();
        assert!(
            (start as f32 - expected).abs() <= 1.0,
            "{start} vs {expected}"
        );
        assert!(five.w > 0);
        let w = s.h_advance(id('1')) + s.h_advance(id('.')) + s.h_advance(id('5'));
        assert!((line.width - w).abs() < 1e-3);
    }
}
