/** Why a call to a replica failed. */
export type BackendErrorCode =
  | 'timeout' // no answer within the call's bound
  | 'connect' // refused, reset, unreachable
  | 'http' // answered with an error status
  | 'protocol'; // answered 2xx with a body we cannot read

export class BackendError extends Error {
  override readonly name = 'BackendError';
  constructor(
    readonly code: BackendErrorCode,
    message: string,
    /** HTTP status for `http`. */
    readonly status?: number,
  ) {
    super(message);
  }
}
