/**
 * A generated framework-like PHP app for the benches (bench/cold-start.ts,
 * bench/reload-under-load.ts): index.php, hold.php (reads its body) and preload.php
 * (opcache.preload of every class).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A framework-like app: `classes` classes of about 4 KB in src/, index.php requires them all and uses a few. */
export function generatePhpApp(dir: string, classes: number): void {
  mkdirSync(join(dir, 'src'), { recursive: true });
  for (let i = 0; i < classes; i++) {
    const methods = Array.from({ length: 12 }, (_, m) => `    public function method${m}(array $input, ?string $key = null): array
    {
        $out = [];
        foreach ($input as $k => $v) {
            if ($key !== null && $k !== $key) { continue; }
            $out[$k . '_${m}'] = is_string($v) ? strtoupper($v) . self::PREFIX : $v * ${m + 1};
        }
        return $out;
    }
`).join('\n');
    writeFileSync(join(dir, `src/Service${i}.php`), `<?php
declare(strict_types=1);

namespace App\\Services;

final class Service${i}${i > 0 ? ` extends \\App\\Services\\Base${i % 10}` : ''}
{
    public const PREFIX = 'service-${i}';
    private array $config = ['name' => 'service${i}', 'enabled' => true, 'weight' => ${i}];

${methods}
}
`);
  }
  for (let b = 0; b < 10; b++) writeFileSync(join(dir, `src/Base${b}.php`), `<?php\nnamespace App\\Services;\nabstract class Base${b} { public function id(): string { return static::class; } }\n`);
  const bases = Array.from({ length: 10 }, (_, b) => `require __DIR__ . '/src/Base${b}.php';`).join('\n');
  writeFileSync(join(dir, 'index.php'), `<?php
${bases}
for ($i = 0; $i < ${classes}; $i++) require __DIR__ . "/src/Service$i.php";
$s = new App\\Services\\Service1();
header('Content-Type: text/plain');
echo count($s->method3(['a' => 'x', 'b' => 2])), ' ', getmypid(), "\\n";
`);
  writeFileSync(join(dir, 'hold.php'), `<?php header('Content-Type: text/plain'); echo strlen(file_get_contents('php://input'));`);
  writeFileSync(join(dir, 'preload.php'), `<?php
${bases.replaceAll('require', 'opcache_compile_file(').replaceAll(".php';", ".php');")}
for ($i = 0; $i < ${classes}; $i++) opcache_compile_file(__DIR__ . "/src/Service$i.php");
`);
  // opcache leaves alone files changed in the last 2 s (file_update_protection).
  const old = new Date(Date.now() - 60_000);
  for (const f of ['index.php', 'hold.php', 'preload.php', ...readdirSync(join(dir, 'src')).map((f) => `src/${f}`)]) execFileSync('touch', ['-d', old.toISOString(), join(dir, f)]);
}

