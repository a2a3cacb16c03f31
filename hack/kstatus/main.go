// kstatus-check: what sigs.k8s.io/cli-utils/pkg/kstatus (the library Flux and
// kpt use to decide whether an applied object is healthy) says of objects.
//
// It reads a JSON object from standard input, a single object or a List
// (`kubectl get -o json`), and prints one JSON line per object:
// {"name": ..., "status": "Current" | "InProgress" | "Failed" | ..., "message": ...}.
// Built by hack/build-kstatus.sh from the Go module proxy; used by
// tests/e2e/test_gitops_health.py.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var object map[string]interface{}
	// Kubernetes' decoder: whole numbers become int64, as the library expects.
	if err := kjson.Unmarshal(data, &object); err != nil {
		fail(err)
	}
	objects := []map[string]interface{}{object}
	if items, isList := object["items"].([]interface{}); isList {
		objects = objects[:0]
		for _, item := range items {
			if itemObject, ok := item.(map[string]interface{}); ok {
				objects = append(objects, itemObject)
			}
		}
	}
	encoder := json.NewEncoder(os.Stdout)
	for _, each := range objects {
		u := &unstructured.Unstructured{Object: each}
		result, err := status.Compute(u)
		if err != nil {
			fail(err)
		}
		if err := encoder.Encode(verdict{u.GetName(), result.Status.String(), result.Message}); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kstatus-check:", err)
	os.Exit(2)
}
