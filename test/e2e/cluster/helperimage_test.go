//go:build e2e

package clustere2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/sbx-sh/sbx/cluster"
)

// The e2e pool preinstalls the helper (sbx pool render --helper-image): an
// image holding the very sbx-inpod the tests upload, at
// cluster.DefaultHelperPath, made here and imported into the lab's
// containerd (there is no registry). A second image holds a helper of
// another build (the same program with bytes appended: it runs, and its
// hash differs), the stale preinstall sbx must not trust.

// labDir is the lab's state directory (run.sh exports LAB).
func labDir() string {
	if d := os.Getenv("LAB"); d != "" {
		return d
	}
	return "/var/tmp/sbx-cluster-lab"
}

// importHelperImage makes an image of helper (plus extra bytes at its end)
// and imports it into the lab's containerd; it returns the image's name,
// tagged with the helper's hash, and that hash.
func importHelperImage(name, helper string, extra []byte) (ref, hash string, err error) {
	bin, err := os.ReadFile(helper)
	if err != nil {
		return "", "", err
	}
	bin = append(bin, extra...)
	sum := sha256.Sum256(bin)
	hash = hex.EncodeToString(sum[:])
	ref = "lab.local/" + name + ":" + hash[:16]
	layout, err := ociImage(ref, cluster.DefaultHelperPath, bin)
	if err != nil {
		return "", "", err
	}
	f, err := os.CreateTemp("", "sbx-e2e-helper-image-*.tar")
	if err != nil {
		return "", "", err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(layout); err != nil {
		return "", "", err
	}
	f.Close()
	out, err := exec.Command("ctr", "--address", filepath.Join(labDir(), "run/containerd.sock"), "-n", "k8s.io",
		"images", "import", f.Name()).CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("import the helper image %s into the lab's containerd (ctr images import): %v: %s", ref, err, out)
	}
	return ref, hash, nil
}

// ociImage is an OCI image layout tarball of one layer holding one
// executable file, as build.sh's oci_image writes them.
func ociImage(ref, file string, content []byte) ([]byte, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dir := ""
	for _, d := range strings.Split(strings.Trim(path.Dir(file), "/"), "/") {
		dir += d + "/"
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755})
	}
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(file, "/"), Mode: 0o755, Size: int64(len(content))})
	tw.Write(content)
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(layer.Bytes())
	zw.Close()
	digest := func(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }
	blobs := map[string][]byte{}
	blob := func(b []byte) map[string]any {
		d := digest(b)
		blobs[d] = b
		return map[string]any{"digest": d, "size": len(b)}
	}
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Cmd": []string{file}, "WorkingDir": "/"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(layer.Bytes())}},
	})
	cd := blob(config)
	cd["mediaType"] = "application/vnd.oci.image.config.v1+json"
	ld := blob(gz.Bytes())
	ld["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
	manifest, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": cd, "layers": []any{ld}})
	md := blob(manifest)
	md["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
	md["annotations"] = map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref[strings.LastIndex(ref, ":")+1:]}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{md}})

	var out bytes.Buffer
	ow := tar.NewWriter(&out)
	add := func(name string, b []byte) {
		ow.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b))})
		ow.Write(b)
	}
	add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	add("index.json", index)
	ow.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "blobs/", Mode: 0o755})
	ow.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "blobs/sha256/", Mode: 0o755})
	for d, b := range blobs {
		add("blobs/sha256/"+strings.TrimPrefix(d, "sha256:"), b)
	}
	if err := ow.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
