package raftfsm

import (
	"fmt"
	"time"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func machineID(i int) string { return fmt.Sprintf("m-%012x", i) }

func mac(i int) string {
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", (i>>16)&0xff, (i>>8)&0xff, i&0xff)
}

func hash64(s string) string { return fmt.Sprintf("%064x", []byte(s)) }
