/** A database URL fit to print: the password, if any, replaced by `***`. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]+:)[^@/]*@/, '$1***@');
}
