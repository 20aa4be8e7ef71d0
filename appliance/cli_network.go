package appliance

import (
	"fmt"
	"io"
)

// cmdNetwork runs the fabric, vlan, subnet, range and ip commands (being written).
func cmdNetwork(noun string, args []string, stdout io.Writer) error {
	return fmt.Errorf("%s: not implemented yet", noun)
}
