package appliance

import (
	"fmt"
	"io"
)

// cmdExport runs `rollcall export` (being written).
func cmdExport(args []string, stdout, stderr io.Writer) error {
	return fmt.Errorf("export: not implemented yet")
}
