package cli

import "io"

// printableWriter is what the CLI prints data through (every client
// command's stdout): control characters other than newline and tab, C0,
// DEL and C1 (UTF-8 U+0080–U+009F, which some terminals obey as CSI and
// OSC), become '?', so a serial or an event message an agent made up cannot
// move the cursor, retitle the terminal or hide what follows. JSON output
// is unaffected: encoding/json escapes control characters itself.
type printableWriter struct {
	w     io.Writer
	lead  bool // the previous byte was 0xC2, the first of a C1 control's two
	clean []byte
}

func (p *printableWriter) Write(b []byte) (int, error) {
	out := p.clean[:0]
	for _, c := range b {
		if p.lead {
			p.lead = false
			if c >= 0x80 && c <= 0x9f {
				out = append(out, '?')
				continue
			}
			out = append(out, 0xc2)
		}
		switch {
		case c == 0xc2:
			p.lead = true
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
			out = append(out, '?')
		default:
			out = append(out, c)
		}
	}
	p.clean = out
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
