/** Types of scripts/system-packages.mjs (plain Node ESM, because it runs before `npm ci` may have happened). */
export type Purpose = 'test' | 'bench' | 'demo';
/** What each entry of scripts/bootstrap.mjs needs of the system, by name. */
export declare const NEEDS: Readonly<Record<Purpose, readonly string[]>>;
/** Where Debian's chromium package puts the browser. */
export declare const CHROMIUM: string;
/** The Debian packages that would bring what `purpose` needs and is missing. */
export declare function missingSystemPackages(purpose?: Purpose): string[];
/** Installs what `purpose` needs (apt-get, as root) or prints the command; 0 when all is present. */
export declare function ensureSystemPackages(purpose?: Purpose): number;
