/**
 * Type-level checks (compiled by test/client/types.ts with tsc, never run): the wire types of the typed client
 * (clients/typescript/src/types.ts) are the same types as the server's TypeBox route schemas, field for field,
 * optional for optional, so a change on either side that the other lacks fails the build.
 */
import type { Static } from 'typebox'
import type {
  PhotoBody, VideoBody, SegmentBody, JobCreated, TaskStatus, ErrorBody, Presigned, Stored, OutputPut, Envelope,
} from '../../server/routes/schemas.js'
import type { AccountData } from '../../server/routes/account.js'
import type { ModelsData } from '../../server/routes/models.js'
import type * as C from '../../clients/typescript/src/index.js'

/** Plain objects all the way down (intersections and aliases flattened), so that identity compares shapes. */
type Norm<T> = T extends (infer U)[] ? Norm<U>[] : T extends object ? { [K in keyof T]: Norm<T[K]> } : T
/** True only when A and B are identical types (optional vs required, extra fields, nullability all count). */
type Same<A, B> = (<T>() => T extends Norm<A> ? 1 : 2) extends (<T>() => T extends Norm<B> ? 1 : 2) ? true : false
const same = <A, B>(v: Same<A, B>) => v

type Data<E> = E extends { data: infer D } ? D : never

export const checks = [
  same<C.PhotoRequest, Static<typeof PhotoBody>>(true),
  same<C.VideoRequest, Static<typeof VideoBody>>(true),
  same<C.SegmentationRequest, Static<typeof SegmentBody>>(true),
  same<C.JobCreated, Data<Static<typeof JobCreated>>>(true),
  same<C.TaskStatus, Data<Static<typeof TaskStatus>>>(true),
  same<C.OutputPut, Static<typeof OutputPut>>(true),
  same<C.ErrorBody, Static<typeof ErrorBody>>(true),
  same<C.Presigned, Static<typeof Presigned>>(true),
  same<C.Stored, Static<typeof Stored>>(true),
  same<C.Account, Static<typeof AccountData>>(true),
  same<C.Models, Static<typeof ModelsData>>(true),
  same<C.Envelope<C.Stored>, Static<ReturnType<typeof Envelope<typeof Stored>>>>(true),
]

// The checks can fail: drift of any kind is caught.
// @ts-expect-error a field missing on one side, although optional
same<Omit<C.TaskStatus, 'output_put'>, Data<Static<typeof TaskStatus>>>(true)
// @ts-expect-error optional on one side, required on the other
same<Required<C.PhotoRequest>, Static<typeof PhotoBody>>(true)
// @ts-expect-error another type of a nested field
same<C.Account & { trial: { left: string } }, Static<typeof AccountData>>(true)
