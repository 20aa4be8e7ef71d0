package console

import (
	"strings"
	"unicode"

	"github.com/rivo/tview"
)

// esc is how every string from the API reaches the screen: control
// characters (C0, DEL and C1, which could move the cursor, retitle the
// terminal or hide text) shown as '?', and tview's [tags] escaped. Data is
// whatever agents and operators sent; the console never lets it steer.
func esc(s string) string { return tview.Escape(Printable(s)) }

// Printable replaces control characters with '?'.
func Printable(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
