package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
)

// Dump renders one screen of the console, width×height, to w as text: the
// page (see PageNames; machine/ID for one machine, rack/NAME for a rack's
// elevation, tag/NAME for a tag, profile/NAME for a stateless profile) as
// the console would show it right after opening it. plain leaves colour out; otherwise each cell's
// colours and attributes are ANSI SGR sequences. A page whose data failed to
// load is still written, with the error on it, and the error is returned.
func Dump(w io.Writer, width, height int, page string, plain bool, data Source) error {
	if width < 40 || height < 12 {
		return fmt.Errorf("dump size %dx%d: at least 40x12", width, height)
	}
	name, id, _ := strings.Cut(page, "/")
	one := (name == "machine" || name == "rack" || name == "tag" || name == "profile") && id != ""
	if !slices.Contains(PageNames(), name) && !one {
		return fmt.Errorf("page %q: not one of %s", page, strings.Join(PageNames(), ", "))
	}
	screen := tcell.NewSimulationScreen("UTF-8")
	app := tview.NewApplication().SetScreen(screen)
	screen.SetSize(width, height)
	c := newConsole(context.Background(), app, data, false)
	c.load("machines", "cluster")
	switch {
	case name == "machine":
		c.back = "machines"
		c.show("machines")
		c.openMachine(id, "machines")
	case name == "rack":
		c.show("racks")
		c.openRack(id)
	case name == "tag":
		c.show("tags")
		c.openTag(id)
	case name == "profile":
		c.show("profiles")
		c.openProfile(id)
	default:
		c.show(name)
		c.focusBody()
	}
	app.ForceDraw()
	cells, cw, ch := screen.GetContents()
	if err := writeCells(w, cells, cw, ch, plain); err != nil {
		return err
	}
	var errs []error
	for what, err := range c.errs {
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	for _, err := range []error{c.detailErr, c.rack.err, c.tag.err, c.profile.err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeCells writes a simulation screen's cells as lines of text.
func writeCells(w io.Writer, cells []tcell.SimCell, width, height int, plain bool) error {
	bw := bufio.NewWriter(w)
	for y := 0; y < height; y++ {
		var line strings.Builder
		var last tcell.Style
		for x := 0; x < width; x++ {
			cell := cells[y*width+x]
			if !plain && (x == 0 || cell.Style != last) {
				line.WriteString(sgr(cell.Style))
				last = cell.Style
			}
			switch {
			case len(cell.Runes) == 0:
				line.WriteByte(' ')
			default:
				line.WriteString(string(cell.Runes))
				if rw := runeWidth(cell.Runes); rw > 1 {
					x += rw - 1 // the cells a wide rune covers
				}
			}
		}
		if plain {
			bw.WriteString(strings.TrimRight(line.String(), " "))
		} else {
			bw.WriteString(line.String())
			bw.WriteString("\x1b[0m")
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

func runeWidth(rs []rune) int {
	w := 0
	for _, r := range rs {
		w += tview.TaggedStringWidth(string(r))
	}
	return w
}

// sgr is the escape sequence that sets a cell's style from scratch.
func sgr(st tcell.Style) string {
	fg, bg, attr := st.Decompose()
	codes := []string{"0"}
	for _, a := range []struct {
		mask tcell.AttrMask
		code string
	}{{tcell.AttrBold, "1"}, {tcell.AttrDim, "2"}, {tcell.AttrItalic, "3"}, {tcell.AttrUnderline, "4"}, {tcell.AttrBlink, "5"}, {tcell.AttrReverse, "7"}, {tcell.AttrStrikeThrough, "9"}} {
		if attr&a.mask != 0 {
			codes = append(codes, a.code)
		}
	}
	codes = append(codes, colorCode(fg, 30), colorCode(bg, 40))
	return "\x1b[" + strings.Join(codes, ";") + "m"
}

// colorCode is the SGR parameter for a colour: base 30 for foreground, 40
// for background; the 16 named colours use their short codes.
func colorCode(c tcell.Color, base int) string {
	switch {
	case c == tcell.ColorDefault || !c.Valid():
		return fmt.Sprint(base + 9)
	case c.IsRGB():
		r, g, b := c.RGB()
		return fmt.Sprintf("%d;2;%d;%d;%d", base+8, r, g, b)
	}
	n := int(c - tcell.ColorValid)
	switch {
	case n < 8:
		return fmt.Sprint(base + n)
	case n < 16:
		return fmt.Sprint(base + 60 + n - 8)
	}
	return fmt.Sprintf("%d;5;%d", base+8, n)
}
