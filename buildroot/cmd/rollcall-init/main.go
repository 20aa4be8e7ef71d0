// Command rollcall-init is /init of the appliance ISO's initramfs: PID 1,
// which sets the machine up and runs `rollcall serve` (buildroot/initsys
// says how).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/rollcall/rollcall/buildroot/initsys"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "rollcall-init is the appliance ISO's PID 1; it does not run as an ordinary program")
		os.Exit(2)
	}
	err := initsys.Run(context.Background(), log, os.Stdout)
	// PID 1 must not exit: the kernel would panic and, with panic=, reboot
	// into the same failure. Say why and stay.
	fmt.Fprintf(os.Stdout, "\nrollcall-init stopped: %v\nthe machine stays up; fix the cause and reboot\n", err)
	for {
		time.Sleep(time.Hour)
	}
}
