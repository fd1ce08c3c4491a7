package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
)

// series is one line of a plot.
type series struct {
	color  color.RGBA
	points []Point
}

// digits is a 3×5 bitmap font for 0-9, each row three bits, high bit left.
var digits = [10][5]uint8{
	{7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1},
	{7, 4, 7, 1, 7}, {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7},
}

const (
	plotW, plotH = 800, 450
	marginL      = 60
	marginB      = 40
	marginT      = 20
	marginR      = 20
	scale        = 2 // font pixel size
)

// plotCurves renders concurrency over time (x: seconds, y: concurrency) for
// every series as a PNG with axes, numbered ticks and one line per series.
func plotCurves(w io.Writer, ss []series) error {
	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	maxX, maxY := 1.0, 1.0
	for _, s := range ss {
		for _, p := range s.points {
			maxX = math.Max(maxX, p.T)
			maxY = math.Max(maxY, p.Concurrency)
		}
	}
	stepX, stepY := niceStep(maxX), niceStep(maxY)
	maxX = math.Ceil(maxX/stepX) * stepX
	maxY = math.Ceil(maxY/stepY) * stepY
	x0, y0 := marginL, plotH-marginB
	x1, y1 := plotW-marginR, marginT
	px := func(t float64) int { return x0 + int(t/maxX*float64(x1-x0)) }
	py := func(v float64) int { return y0 - int(v/maxY*float64(y0-y1)) }
	black := color.RGBA{0, 0, 0, 255}
	grey := color.RGBA{220, 220, 220, 255}
	for t := 0.0; t <= maxX+stepX/2; t += stepX {
		x := px(t)
		line(img, x, y0, x, y1, grey)
		line(img, x, y0, x, y0+5, black)
		label := strconv.Itoa(int(math.Round(t)))
		text(img, x-len(label)*4*scale/2, y0+9, label, black)
	}
	for v := 0.0; v <= maxY+stepY/2; v += stepY {
		y := py(v)
		line(img, x0, y, x1, y, grey)
		line(img, x0-5, y, x0, y, black)
		label := strconv.Itoa(int(math.Round(v)))
		text(img, x0-8-len(label)*4*scale, y-5*scale/2, label, black)
	}
	line(img, x0, y0, x1, y0, black)
	line(img, x0, y0, x0, y1, black)
	for _, s := range ss {
		for i := 1; i < len(s.points); i++ {
			a, b := s.points[i-1], s.points[i]
			line(img, px(a.T), py(a.Concurrency), px(b.T), py(b.Concurrency), s.color)
			line(img, px(a.T), py(a.Concurrency)-1, px(b.T), py(b.Concurrency)-1, s.color)
		}
	}
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("encoding the plot: %w", err)
	}
	return nil
}

// niceStep picks a tick step of 1, 2 or 5 times a power of ten giving at
// most about ten ticks up to max.
func niceStep(max float64) float64 {
	raw := max / 10
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// line draws a line with Bresenham's algorithm.
func line(img *image.RGBA, xa, ya, xb, yb int, c color.RGBA) {
	dx, dy := abs(xb-xa), -abs(yb-ya)
	sx, sy := sign(xb-xa), sign(yb-ya)
	e := dx + dy
	for {
		img.SetRGBA(xa, ya, c)
		if xa == xb && ya == yb {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			xa += sx
		}
		if e2 <= dx {
			e += dx
			ya += sy
		}
	}
}

// text draws the digits of s (other characters are skipped) at x, y.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range s {
		if r >= '0' && r <= '9' {
			glyph := digits[r-'0']
			for row := 0; row < 5; row++ {
				for col := 0; col < 3; col++ {
					if glyph[row]&(4>>col) != 0 {
						for i := 0; i < scale; i++ {
							for j := 0; j < scale; j++ {
								img.SetRGBA(x+col*scale+i, y+row*scale+j, c)
							}
						}
					}
				}
			}
		}
		x += 4 * scale
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
