package emulators

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// azuriteInstall is the command that installs Azurite where Azurite looks for it first.
const azuriteInstall = "(cd internal/emulators/testdata/azurite && npm ci --no-audit --no-fund)"

// Azurite's well-known development account (public, documented by Microsoft; not a secret).
const (
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite runs Azurite's blob service (npm azurite, pinned by testdata/azurite/package-lock.json;
// in memory, plain HTTP, telemetry off) on a free loopback port with an empty container named
// BucketName, and gives the Azure SDK the emulator's development account for the rest of the test.
// gocloud.dev's azureblob takes the account and key from AZURE_STORAGE_ACCOUNT/AZURE_STORAGE_KEY and
// the endpoint from the URL: with domain=127.0.0.1:PORT&protocol=http it addresses
// http://127.0.0.1:PORT/ACCOUNT, the emulator's path-style URL. See azuriteScript for where Azurite
// is found; without node (or npm, when it must install) the test is skipped, or fails when CI is set.
func Azurite(t testing.TB) *Bucket {
	t.Helper()
	node, script := azuriteScript(t)
	addr := freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	// --inMemoryPersistence refuses --location; the working folder catches anything else it writes.
	cmd := exec.Command(node, script, "--blobHost", "127.0.0.1", "--blobPort", port,
		"--inMemoryPersistence", "--disableTelemetry", "--silent", "--skipApiVersionCheck")
	cmd.Dir = t.TempDir()
	startLoopbackServer(t, "azurite", cmd, addr)
	setAzureEnv(t)
	createAzureContainer(t, "http://"+addr+"/"+azuriteAccount+"/"+BucketName)
	return &Bucket{
		Server: "azurite",
		url: func(prefix string) string {
			q := url.Values{}
			q.Set("domain", addr)
			q.Set("protocol", "http")
			return "azblob://" + BucketName + "/" + prefix + "?" + q.Encode()
		},
	}
}

// azuriteScript returns node and Azurite's blob service script: $NDTRACE_AZURITE (the script, or an
// installation folder holding node_modules), else internal/emulators/testdata/azurite/node_modules
// at the module root (see azuriteInstall), else a fresh npm ci of that folder into a temporary
// folder (not with -short).
func azuriteScript(t testing.TB) (node, script string) {
	t.Helper()
	node = RequireTool(t, "node", "Azurite runs under Node.js")
	const rel = "node_modules/azurite/dist/src/blob/main.js"
	if env := os.Getenv("NDTRACE_AZURITE"); env != "" {
		for _, p := range []string{env, filepath.Join(env, rel)} {
			if fileExists(p) {
				return node, p
			}
		}
		t.Fatalf("NDTRACE_AZURITE=%s is neither Azurite's blob script nor a folder holding %s", env, rel)
	}
	src := filepath.Join(moduleRoot(t), "internal", "emulators", "testdata", "azurite")
	if p := filepath.Join(src, rel); fileExists(p) {
		return node, p
	}
	if testing.Short() {
		t.Skipf("Azurite is not installed (install it at the module root with: %s); -short does not install it", azuriteInstall)
	}
	npm := RequireTool(t, "npm", "Azurite is installed with npm")
	work := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("Azurite is not installed in %s (%s); installing it into a temporary folder", src, azuriteInstall)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of %s: %v\n%s", src, err, out)
	}
	p := filepath.Join(work, rel)
	if !fileExists(p) {
		t.Fatalf("npm ci did not install %s", p)
	}
	return node, p
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// setAzureEnv gives the Azure SDK Azurite's development account as a shared key, and clears every
// other credential source, so that no request leaves loopback. gocloud.dev's azureblob reads these
// variables once per process, on its first azblob:// URL.
func setAzureEnv(t testing.TB) {
	t.Setenv("AZURE_STORAGE_ACCOUNT", azuriteAccount)
	t.Setenv("AZURE_STORAGE_KEY", azuriteKey)
	for _, v := range []string{"AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING",
		"AZURE_STORAGE_DOMAIN", "AZURE_STORAGE_PROTOCOL", "AZURE_STORAGE_IS_CDN", "AZURE_STORAGE_IS_LOCAL_EMULATOR"} {
		t.Setenv(v, "")
	}
}

// createAzureContainer creates the container at containerURL with the Azure SDK (gocloud.dev has
// no bucket creation) and checks that it is empty and listable.
func createAzureContainer(t testing.TB, containerURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cred, err := container.NewSharedKeyCredential(azuriteAccount, azuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(containerURL, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, nil); err != nil {
		t.Fatalf("create container %s: %v", containerURL, err)
	}
	page, err := c.NewListBlobsFlatPager(nil).NextPage(ctx)
	if err != nil {
		t.Fatalf("list new container %s: %v", containerURL, err)
	}
	if n := len(page.Segment.BlobItems); n > 0 {
		t.Fatalf("new container %s holds %d blobs", containerURL, n)
	}
}
