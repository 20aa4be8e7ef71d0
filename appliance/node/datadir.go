package node

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// What a client on the node (the CLI, the console) reads of the node's data
// directory to find its API without flags: the layout stays this package's,
// and these name the three files it may read.

// NodeInfoFile is DATA/node.json, which a running node writes with its API
// address (NodeInfo).
func NodeInfoFile(dataDir string) string { return filepath.Join(dataDir, fileNodeInfo) }

// AdminTokenFile is DATA/admin.token, the cluster's admin token.
func AdminTokenFile(dataDir string) string { return filepath.Join(dataDir, fileAdmin) }

// CAFile is DATA/tls/ca.pem, the cluster CA an https:// API URL is checked
// against.
func CAFile(dataDir string) string { return filepath.Join(dataDir, dirTLS, fileCA) }

// ReadNodeInfo reads and decodes NodeInfoFile(dataDir).
func ReadNodeInfo(dataDir string) (NodeInfo, error) {
	var info NodeInfo
	b, err := os.ReadFile(NodeInfoFile(dataDir))
	if err != nil {
		return info, err
	}
	err = json.Unmarshal(b, &info)
	return info, err
}
