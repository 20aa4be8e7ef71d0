package main

import (
	"bytes"
	"syscall"
)

// setHostname makes the kernel's host name the one etc/hostname was just
// given (systemd read the old one at boot).
func setHostname(files []File) {
	for _, f := range files {
		if f.Path == "etc/hostname" && !f.Dir {
			if name := bytes.TrimSpace(f.Data); len(name) > 0 && len(name) <= 64 {
				syscall.Sethostname(name)
			}
		}
	}
}
