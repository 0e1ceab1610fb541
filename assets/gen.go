//go:build ignore

// gen draws Codexgate's icons: a gate (two posts and a bar) on a rounded
// square, in the colour of the state, with a badge when cards wait.
// Run with: go run gen.go
package main

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
)

type icon struct {
	name  string
	bg    color.NRGBA
	badge bool
}

func main() {
	icons := []icon{
		{"idle", color.NRGBA{0x5f, 0x6b, 0x7a, 0xff}, false},
		{"working", color.NRGBA{0x1f, 0x6f, 0xd1, 0xff}, false},
		{"waiting", color.NRGBA{0xe0, 0x7b, 0x00, 0xff}, true},
	}
	for _, ic := range icons {
		write("tray-"+ic.name+".png", draw(64, ic))
	}
	write("Icon.png", draw(256, icons[1]))
}

func write(name string, img image.Image) {
	f, err := os.Create(name)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		panic(err)
	}
}

// draw renders the icon at size pixels with 4x4 supersampling.
func draw(size int, ic icon) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	s := float64(size)
	white := color.NRGBA{0xff, 0xff, 0xff, 0xff}
	red := color.NRGBA{0xd9, 0x1e, 0x18, 0xff}
	for y := 0; y < size; y++ {
		for x := 0; x < size; x++ {
			var r, g, b, a float64
			for sy := 0; sy < 4; sy++ {
				for sx := 0; sx < 4; sx++ {
					px, py := (float64(x)+(float64(sx)+0.5)/4)/s, (float64(y)+(float64(sy)+0.5)/4)/s
					c, ok := shade(px, py, ic, white, red)
					if !ok {
						continue
					}
					r += float64(c.R)
					g += float64(c.G)
					b += float64(c.B)
					a += 255
				}
			}
			if a == 0 {
				continue
			}
			n := a / 255
			img.SetNRGBA(x, y, color.NRGBA{uint8(r / n), uint8(g / n), uint8(b / n), uint8(a / 16)})
		}
	}
	return img
}

func shade(x, y float64, ic icon, white, red color.NRGBA) (color.NRGBA, bool) {
	if ic.badge && math.Hypot(x-0.78, y-0.22) < 0.2 {
		if math.Hypot(x-0.78, y-0.22) < 0.16 {
			return red, true
		}
		return white, true
	}
	if !roundRect(x, y, 0.06, 0.06, 0.94, 0.94, 0.2) {
		return color.NRGBA{}, false
	}
	post := (x > 0.24 && x < 0.36 || x > 0.64 && x < 0.76) && y > 0.22 && y < 0.8
	bar := x > 0.24 && x < 0.76 && (y > 0.34 && y < 0.43 || y > 0.55 && y < 0.64)
	if post || bar {
		return white, true
	}
	return ic.bg, true
}

func roundRect(x, y, x0, y0, x1, y1, r float64) bool {
	cx := math.Max(x0+r, math.Min(x, x1-r))
	cy := math.Max(y0+r, math.Min(y, y1-r))
	return x >= x0 && x <= x1 && y >= y0 && y <= y1 && math.Hypot(x-cx, y-cy) <= r
}
