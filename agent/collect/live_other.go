//go:build !linux

package collect

import (
	"context"
	"errors"

	"github.com/rollcall/rollcall/store/inventory"
)

func ethtoolDriverInfo(string) (string, string) { return "", "" }

func listenLLDP(context.Context, string) ([]inventory.LLDP, error) {
	return nil, errors.New("lldp capture needs Linux")
}
