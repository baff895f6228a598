package config

import (
	"strings"
	"testing"
)

// The disk limit loads like memory: a size, 0 for none, and the project's
// file may only lower it.
func TestDiskLimit(t *testing.T) {
	for _, c := range []struct {
		name          string
		user, project string
		env           []string
		want          int64
		wantErr       string
	}{
		{name: "default", want: 10 << 30},
		{name: "user raises", user: "disk = \"20GiB\"\n", want: 20 << 30},
		{name: "user lifts", user: "disk = 0\n", want: 0},
		{name: "bytes", user: "disk = 1048576\n", want: 1 << 20},
		{name: "project lowers", project: "disk = \"1GiB\"\n", want: 1 << 30},
		{name: "project lowers a lifted limit", user: "disk = 0\n", project: "disk = \"1GiB\"\n", want: 1 << 30},
		{name: "project raises", project: "disk = \"64GiB\"\n", wantErr: ":1: disk: the project's .sbx.toml may only narrow"},
		{name: "project lifts", project: "disk = 0\n", wantErr: "disk: the project's .sbx.toml may only narrow"},
		{name: "env", env: []string{"SBX_DISK=512MiB"}, want: 512 << 20},
		{name: "env lifts", env: []string{"SBX_DISK=0"}, want: 0},
		{name: "env after project", project: "disk = \"1GiB\"\n", env: []string{"SBX_DISK=2GiB"}, want: 2 << 30},
		{name: "bad value", user: "disk = \"lots\"\n", wantErr: ":1: disk: \"lots\" is not a size"},
		{name: "bad env", env: []string{"SBX_DISK=lots"}, wantErr: "environment: SBX_DISK: \"lots\" is not a size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := Sources{UserFile: writeFile(t, c.user), Env: append([]string{"X=1"}, c.env...)}
			if c.project != "" {
				src.ProjectFile = writeFile(t, c.project)
			}
			cfg, err := Load(src)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || cfg.Disk != c.want {
				t.Fatalf("disk %d, err %v; want %d", cfg.Disk, err, c.want)
			}
		})
	}
	var cfg Config
	if err := cfg.Set("disk", "3GiB"); err != nil || cfg.Disk != 3<<30 {
		t.Fatalf("Set: %d %v", cfg.Disk, err)
	}
}
