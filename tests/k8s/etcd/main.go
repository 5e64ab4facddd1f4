// etcd, as the release of go.etcd.io/etcd/server that kube-apiserver is
// tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
